//! Operator overloads (`&a + &b`, `&a * 2.0`, `-&a`).
//!
//! They call the methods of the same name and **panic** with the method's
//! error message on bad input (shape mismatch, dtype error); use the methods
//! (`a.add(&b)?`) to handle errors instead.

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::Tensor;

macro_rules! overload {
    ($trait:ident, $method:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$method(self, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }

        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$method(&self, &rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }

        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$method(&self, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }

        impl $trait<f64> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: f64) -> Tensor {
                Tensor::$method(self, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }

        impl $trait<f64> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: f64) -> Tensor {
                Tensor::$method(&self, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }

        impl $trait<&Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                crate::ops::binary::binary_scalar_lhs(crate::ops::BinaryKind::$trait, self.into(), rhs)
                    .unwrap_or_else(|e| panic!("{e}"))
            }
        }
    };
}

overload!(Add, add);
overload!(Sub, sub);
overload!(Mul, mul);
overload!(Div, div);

impl Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self).unwrap_or_else(|e| panic!("{e}"))
    }
}
