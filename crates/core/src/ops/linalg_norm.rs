//! `torch.linalg` norms: `vector_norm` with its `dtype`, `matrix_norm`
//! over any two dims (`'fro'`, `'nuc'`, 1, -1, 2, -2, inf, -inf) and the
//! dispatching front end `linalg.norm`. Each is written as PyTorch's
//! `LinearAlgebra.cpp` writes it (same checks and messages, same graph:
//! `LinalgVectorNormBackward0` for vector and Frobenius norms, `amax` /
//! `amin` / `sum` of singular values or of column sums for the others).

use crate::layout::normalize_dim;
use crate::{DType, Error, Result, Tensor};

/// The order of a matrix norm (`torch.linalg.matrix_norm`'s `ord`), also
/// the `ord` of [`Tensor::linalg_norm`], where a number is a vector
/// order when the norm is over one dim. Parses from `"fro"` and `"nuc"`
/// (any other string is PyTorch's "Order ... not supported." error).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MatrixOrd {
    /// `'fro'`.
    Fro,
    /// `'nuc'`: the sum of singular values.
    Nuc,
    /// A number: inf, -inf, 1, -1, 2, -2 (any number for a vector norm).
    P(f64),
}

impl std::str::FromStr for MatrixOrd {
    type Err = Error;

    /// `"fro"` or `"nuc"`; anything else is an error naming `linalg.matrix_norm`.
    fn from_str(s: &str) -> Result<MatrixOrd> {
        match s {
            "fro" => Ok(MatrixOrd::Fro),
            "nuc" => Ok(MatrixOrd::Nuc),
            other => Err(Error::invalid(
                "linalg.matrix_norm",
                format!("Order {other} not supported."),
            )),
        }
    }
}

/// A number as C++'s `operator<<` prints PyTorch's `Scalar` (`2`, `-inf`, `3.5`).
pub(crate) fn fmt_ord(p: f64) -> String {
    if p.is_infinite() {
        if p > 0.0 { "inf".into() } else { "-inf".into() }
    } else if p.fract() == 0.0 && p.abs() < 1e15 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

/// PyTorch's `checkFloatingOrComplex`: a float input (f16 and bf16 only
/// where `low_precision` allows).
pub(crate) fn check_float(op: &'static str, x: &Tensor, low_precision: bool) -> Result<()> {
    let dt = x.dtype();
    if !dt.is_floating_point() {
        return Err(Error::dtype(
            op,
            dt,
            format!(
                "Expected a floating point or complex tensor as input. Got {}",
                dt.scalar_type_name()
            ),
        ));
    }
    if !low_precision && matches!(dt, DType::F16 | DType::BF16) {
        return Err(Error::dtype(
            op,
            dt,
            format!("Low precision dtypes not supported. Got {}", dt.scalar_type_name()),
        ));
    }
    Ok(())
}

/// PyTorch's `check_linalg_norm_dtype`: a float `dtype` the input converts
/// to without narrowing.
fn check_norm_dtype(op: &'static str, input: DType, dtype: Option<DType>) -> Result<()> {
    let Some(dt) = dtype else { return Ok(()) };
    if !dt.is_floating_point() {
        return Err(Error::invalid(
            op,
            format!(
                "dtype should be floating point or complex, but got {}",
                dt.scalar_type_name()
            ),
        ));
    }
    if input.promote(dt) != dt {
        return Err(Error::invalid(
            op,
            format!(
                "the dtype of the input ({}) should be convertible without narrowing to the specified dtype ({})",
                input.scalar_type_name(),
                dt.scalar_type_name()
            ),
        ));
    }
    Ok(())
}

/// `[others..., d0, d1]`: the permutation moving `d0`, `d1` to the end.
fn backshift(d0: usize, d1: usize, ndim: usize) -> Vec<i64> {
    let mut p: Vec<i64> = (0..ndim).filter(|&d| d != d0 && d != d1).map(|d| d as i64).collect();
    p.extend([d0 as i64, d1 as i64]);
    p
}

/// The inverse of a permutation.
fn inverse(p: &[i64]) -> Vec<i64> {
    let mut inv = vec![0i64; p.len()];
    for (i, &d) in p.iter().enumerate() {
        inv[d as usize] = i as i64;
    }
    inv
}

/// # Norms (`torch.linalg`)
///
/// ```
/// use ferrotorch_core::{MatrixOrd, Tensor};
/// let a = Tensor::new([[3.0f64, 0.0], [0.0, -4.0]])?;
/// assert_eq!(a.linalg_norm(None, None, false, None)?.item::<f64>()?, 5.0);
/// assert_eq!(a.linalg_norm(Some(MatrixOrd::Nuc), None, false, None)?.item::<f64>()?, 7.0);
/// assert_eq!(a.linalg_vector_norm_with(1.0, Some(&[1]), false, None)?.to_vec::<f64>()?, [3.0, 4.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// `torch.linalg.vector_norm(self, ord, dim, keepdim)` (`()`: all dims).
    ///
    /// Errors as [`Tensor::linalg_vector_norm_with`].
    pub fn linalg_vector_norm(&self, ord: f64, dims: impl crate::IntoShape, keepdim: bool) -> Result<Tensor> {
        let dims = dims.into_shape().to_vec();
        self.linalg_vector_norm_with(ord, Some(&dims), keepdim, None)
    }

    /// `torch.linalg.vector_norm(self, ord, dim, keepdim, dtype=dtype)`:
    /// `dims` `None` (or empty) reduces every dim; `dtype` converts the
    /// input first (the gradient flows back through the conversion).
    ///
    /// Errors (PyTorch's messages): a non-float input, a `dtype` that is
    /// not a float or would narrow the input's, a negative or infinite
    /// `ord` over an empty tensor or empty dim, a dim out of range.
    pub fn linalg_vector_norm_with(
        &self,
        ord: f64,
        dims: Option<&[i64]>,
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        let op = "linalg.vector_norm";
        check_float(op, self, true)?;
        check_norm_dtype(op, self.dtype(), dtype)?;
        let dims: Vec<i64> = dims.map(<[i64]>::to_vec).unwrap_or_default();
        if ord < 0.0 || ord == f64::INFINITY {
            if dims.is_empty() {
                if self.numel() == 0 {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "linalg.vector_norm cannot compute the {} norm on an empty tensor because the operation does not have an identity",
                            fmt_ord(ord)
                        ),
                    ));
                }
            } else {
                for &d in &dims {
                    let d = normalize_dim(op, d, self.ndim())?;
                    if self.shape().get(d) == Some(&0) {
                        return Err(Error::invalid(
                            op,
                            format!(
                                "linalg.vector_norm cannot compute the {} norm on the dimension {d}because this dimension is empty and the operation does not have an identity",
                                fmt_ord(ord)
                            ),
                        ));
                    }
                }
            }
        }
        let x = match dtype {
            Some(dt) if dt != self.dtype() => self.to_dtype(dt)?,
            _ => self.clone(),
        };
        x.norm_dim(ord, dims, keepdim)
    }

    /// `torch.linalg.matrix_norm(self, ord, dim=(-2, -1), keepdim)`.
    ///
    /// Errors as [`Tensor::linalg_matrix_norm_with`].
    pub fn linalg_matrix_norm(&self, ord: MatrixOrd, keepdim: bool) -> Result<Tensor> {
        self.linalg_matrix_norm_with(ord, &[-2, -1], keepdim, None)
    }

    /// `torch.linalg.matrix_norm(self, ord, dim, keepdim, dtype=dtype)`:
    /// the norm of the matrices spanned by the two `dims`, computed as
    /// PyTorch does (`'fro'` a vector 2-norm; `'nuc'`, 2 and -2 from the
    /// singular values; 1, -1, inf and -inf the largest or smallest
    /// absolute column or row sum).
    ///
    /// Errors (PyTorch's messages): an order other than those, fewer than
    /// 2 dims, a non-float input (f16/bf16 also for `'nuc'`, 2, -2),
    /// `dims` not two different dims in range, a narrowing `dtype`.
    pub fn linalg_matrix_norm_with(
        &self,
        ord: MatrixOrd,
        dims: &[i64],
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        let op = "linalg.matrix_norm";
        if let MatrixOrd::P(p) = ord
            && !matches!(p.abs(), 1.0 | 2.0 | f64::INFINITY)
        {
            return Err(Error::invalid(op, format!("Order {} not supported.", fmt_ord(p))));
        }
        if self.ndim() < 2 {
            return Err(Error::invalid(
                op,
                "The input tensor A must have at least 2 dimensions.",
            ));
        }
        let svd_based = matches!(ord, MatrixOrd::Nuc | MatrixOrd::P(2.0) | MatrixOrd::P(-2.0));
        check_float(op, self, !svd_based)?;
        if dims.len() != 2 {
            return Err(Error::invalid(
                op,
                format!(
                    "dim must be a 2-tuple. Got {}",
                    dims.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")
                ),
            ));
        }
        let (d0, d1) = (
            normalize_dim(op, dims[0], self.ndim())?,
            normalize_dim(op, dims[1], self.ndim())?,
        );
        if d0 == d1 {
            return Err(Error::invalid(op, format!("dims must be different. Got ({d0}, {d1})")));
        }
        check_norm_dtype(op, self.dtype(), dtype)?;
        let (a0, a1) = (d0 as i64, d1 as i64);
        match ord {
            MatrixOrd::Fro => self.linalg_vector_norm_with(2.0, Some(&[a0, a1]), keepdim, dtype),
            MatrixOrd::Nuc | MatrixOrd::P(2.0) | MatrixOrd::P(-2.0) => {
                let x = match dtype {
                    Some(dt) if dt != self.dtype() => self.to_dtype(dt)?,
                    _ => self.clone(),
                };
                let perm = backshift(d0, d1, self.ndim());
                let s = x.permute(perm.clone())?.linalg_svdvals()?;
                let empty = s.shape().last() == Some(&0);
                let r = match ord {
                    MatrixOrd::Nuc => s.sum_dim([-1i64], keepdim)?,
                    // PyTorch gives the 2-norm of an empty matrix as 0 (outside the graph).
                    MatrixOrd::P(p) if p > 0.0 && empty => {
                        let mut shape = s.shape()[..s.ndim() - 1].to_vec();
                        if keepdim {
                            shape.push(1);
                        }
                        crate::TensorOptions::like(&s).zeros(shape)?
                    }
                    MatrixOrd::P(p) if p > 0.0 => s.amax([-1i64], keepdim)?,
                    _ => s.amin([-1i64], keepdim)?,
                };
                if keepdim {
                    r.unsqueeze(-1)?.permute(inverse(&perm))
                } else {
                    Ok(r)
                }
            }
            MatrixOrd::P(p) => {
                // The inf norm is the 1 norm of the transpose.
                let (e0, mut e1) = if p.is_infinite() { (a1, a0) } else { (a0, a1) };
                if !keepdim && e0 < e1 {
                    e1 -= 1;
                }
                let cols = self.linalg_vector_norm_with(1.0, Some(&[e0]), keepdim, dtype)?;
                if p > 0.0 {
                    cols.amax([e1], keepdim)
                } else {
                    cols.amin([e1], keepdim)
                }
            }
        }
    }

    /// `torch.linalg.norm(self, ord, dim, keepdim, dtype=dtype)`: a matrix
    /// norm when `ord` is given and the norm spans two dims (two `dims`, or
    /// none and a 2-D input; `'fro'` and `'nuc'` always), otherwise a
    /// vector norm (`ord` default 2, over `dims` or every dim).
    ///
    /// Errors (PyTorch's messages): `dims` of a length other than 1 or 2,
    /// an `ord` without `dims` for an input that is not 1-D or 2-D, and
    /// those of [`Tensor::linalg_vector_norm_with`] and
    /// [`Tensor::linalg_matrix_norm_with`].
    pub fn linalg_norm(
        &self,
        ord: Option<MatrixOrd>,
        dims: Option<&[i64]>,
        keepdim: bool,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        let op = "linalg.norm";
        match dims {
            Some(d) if d.len() != 1 && d.len() != 2 => {
                return Err(Error::invalid(
                    op,
                    format!("If dim is specified, it must be of length 1 or 2. Got {d:?}"),
                ));
            }
            None if ord.is_some() && self.ndim() != 1 && self.ndim() != 2 => {
                return Err(Error::invalid(
                    op,
                    format!(
                        "If dim is not specified but ord is, the input must be 1D or 2D. Got {}D.",
                        self.ndim()
                    ),
                ));
            }
            _ => {}
        }
        match ord {
            Some(o @ (MatrixOrd::Fro | MatrixOrd::Nuc)) => {
                self.linalg_matrix_norm_with(o, dims.unwrap_or(&[0, 1]), keepdim, dtype)
            }
            Some(o @ MatrixOrd::P(_)) if dims.map_or(self.ndim() == 2, |d| d.len() == 2) => {
                self.linalg_matrix_norm_with(o, dims.unwrap_or(&[0, 1]), keepdim, dtype)
            }
            Some(MatrixOrd::P(p)) => self.linalg_vector_norm_with(p, dims, keepdim, dtype),
            None => self.linalg_vector_norm_with(2.0, dims, keepdim, dtype),
        }
    }
}
