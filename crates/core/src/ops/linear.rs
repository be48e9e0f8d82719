//! `torch.nn.functional.linear` as PyTorch 2.15's composite
//! (`aten/src/ATen/native/Linear.cpp`): which operators it runs decides
//! the graph's nodes, the rounding and the dtype rules, so it is written
//! here, where `_unsafe_view` is visible, rather than in `nn`.

use crate::ops::view::unsafe_view;
use crate::{Error, Result, Tensor};

/// # Linear layers
impl Tensor {
    /// `F.linear(self, weight, bias)`: `self @ weight.T + bias` for `self`
    /// `[*, in]`, `weight` `[out, in]`, as PyTorch composes it:
    ///
    /// - a 2-d input with a bias is one `addmm` (node `AddmmBackward0`);
    /// - a contiguous input of any other rank with a 1-d bias is flattened
    ///   to `[-1, in]`, one `addmm`, and `_unsafe_view`ed back
    ///   (`UnsafeViewBackward0`);
    /// - anything else is `matmul(self, weight.T)`, then the bias added in
    ///   place (`AddBackward0`), so the result keeps the product's dtype.
    ///
    /// Errors as those operators': a 0-d input or weight (PyTorch's "both
    /// arguments to linear need to be at least 1D"), a weight of more than
    /// 2 dims (`t()`'s message), inner sizes
    /// that differ (both shapes named), dtypes `addmm` refuses (PyTorch's
    /// "self and mat2 must have the same dtype"), a bias that does not
    /// broadcast to the result.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let x = Tensor::ones([2, 5, 3])?;
    /// let (w, b) = (Tensor::ones([4, 3])?, Tensor::new([1.0f32, 2.0, 3.0, 4.0])?);
    /// let y = x.linear(&w, Some(&b))?;
    /// assert_eq!(y.shape(), [2, 5, 4]);
    /// assert_eq!(y.to_vec::<f32>()?[..4], [4.0, 5.0, 6.0, 7.0]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        if self.ndim() == 0 || weight.ndim() == 0 {
            return Err(Error::invalid(
                "linear",
                format!(
                    "both arguments to linear need to be at least 1D, but they are {}D and {}D",
                    self.ndim(),
                    weight.ndim()
                ),
            ));
        }
        let wt = weight.t()?;
        match bias {
            Some(b) if self.ndim() == 2 => b.addmm(self, &wt, 1.0, 1.0),
            Some(b) if b.ndim() == 1 && self.is_contiguous() => {
                // The leading dims' product, not -1: it must stay defined
                // when the inner size is 0.
                let (lead, inner) = self.shape().split_at(self.ndim() - 1);
                let rows = lead.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
                let rows = rows.ok_or_else(|| Error::invalid("linear", "the input's size overflows"))?;
                let flat = self.view([rows as i64, inner[0] as i64])?;
                let y = b.addmm(&flat, &wt, 1.0, 1.0)?;
                let mut shape: Vec<i64> = lead.iter().map(|&s| s as i64).collect();
                shape.push(y.shape()[1] as i64);
                unsafe_view(&y, &shape)
            }
            Some(b) => self.matmul(&wt)?.add_(b),
            None => self.matmul(&wt),
        }
    }
}
