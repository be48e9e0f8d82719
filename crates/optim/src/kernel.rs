//! The fused update loops' access to tensor memory.
//!
//! An optimizer step reads a parameter's gradient and rewrites the
//! parameter and its state tensors in one pass. [`fused`] locks the
//! storages (in address order, as the core's kernels do, so a step never
//! deadlocks against a concurrent tensor op), checks that every tensor is
//! a dense CPU tensor of the element type with the parameter's element
//! count, and hands the closure plain slices: chunks of 32768 elements on
//! the rayon pool for large parameters, the whole slices otherwise. The
//! update is elementwise, so the result does not depend on the split.

use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::backend::storage::Buffer;
use ferrotorch_core::{DType, Device, Element, Tensor};
use rayon::prelude::*;

use crate::error::{Error, Result};

/// Elements per parallel chunk; parameters with fewer run on the caller's thread.
const CHUNK: usize = 32768;

/// The float types an update runs in (`f32`, `f64`): PyTorch's CPU kernels
/// compute in the parameter's own dtype, rounding every operation to it.
pub(crate) trait Float:
    Element
    + Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    /// The Python float converted as ATen converts a `Scalar` argument
    /// (`value.to<scalar_t>()`: rounded to nearest).
    fn of(x: f64) -> Self;
    /// `self * a + b` with one rounding.
    fn fma(self, a: Self, b: Self) -> Self;
    /// The correctly rounded square root.
    fn sqrt(self) -> Self;
    /// `torch.maximum`: NaN from either side propagates.
    fn maximum(self, other: Self) -> Self;
    /// `lerp(self, end, weight)` as ATen's CPU kernel: a fused multiply-add
    /// from `self` for `|weight| < 0.5`, else from `end`.
    #[inline(always)]
    fn lerp(self, end: Self, w: Self) -> Self {
        let small = if w < Self::of(0.0) { -w } else { w } < Self::of(0.5);
        if small {
            w.fma(end - self, self)
        } else {
            (w - Self::of(1.0)).fma(end - self, end)
        }
    }
}

impl Float for f32 {
    #[inline(always)]
    fn of(x: f64) -> f32 {
        x as f32
    }
    #[inline(always)]
    fn fma(self, a: f32, b: f32) -> f32 {
        self.mul_add(a, b)
    }
    #[inline(always)]
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn maximum(self, other: f32) -> f32 {
        if self.is_nan() || other.is_nan() {
            f32::NAN
        } else if self > other {
            self
        } else {
            other
        }
    }
}

impl Float for f64 {
    #[inline(always)]
    fn of(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn fma(self, a: f64, b: f64) -> f64 {
        self.mul_add(a, b)
    }
    #[inline(always)]
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn maximum(self, other: f64) -> f64 {
        if self.is_nan() || other.is_nan() {
            f64::NAN
        } else if self > other {
            self
        } else {
            other
        }
    }
}

/// Calls `f::<T.., A, B, ..>(args)` with each of the run-time switches
/// `[a, b, ..]` turned into a `const bool` parameter, so every combination
/// gets its own loop without a per-element branch:
/// `with_flags!(sgd_loop::<f32>(p, g, &k); [k.maximize, k.weight_decay])`
/// calls `sgd_loop::<f32, true, false>(p, g, &k)` when only `maximize` is set.
macro_rules! with_flags {
    ($f:ident::<$($done:tt),*>($($arg:expr),* $(,)?); []) => {
        $f::<$($done),*>($($arg),*)
    };
    ($f:ident::<$($done:tt),*>($($arg:expr),* $(,)?); [$flag:expr $(, $rest:expr)* $(,)?]) => {
        if $flag {
            $crate::kernel::with_flags!($f::<$($done,)* true>($($arg),*); [$($rest),*])
        } else {
            $crate::kernel::with_flags!($f::<$($done,)* false>($($arg),*); [$($rest),*])
        }
    };
}
pub(crate) use with_flags;

/// A held storage lock.
enum Guard<'a> {
    Read(RwLockReadGuard<'a, Buffer>),
    Write(RwLockWriteGuard<'a, Buffer>),
}

/// Where a tensor's elements start, with the checks that make a slice of
/// `n` elements there valid.
fn check<T: Float>(what: &str, t: &Tensor, n: usize) -> std::result::Result<(), String> {
    if t.dtype() != T::DTYPE {
        return Err(format!("{what} has dtype {}, expected {}", t.dtype(), T::DTYPE));
    }
    if t.numel() != n {
        return Err(format!("{what} has {} elements, expected {n}", t.numel()));
    }
    if !t.device().is_cpu() && t.device() != Device::Meta {
        return Err(format!("{what} is on {}; the optimizers run on the CPU", t.device()));
    }
    if !t.is_contiguous() {
        return Err(format!("{what} is not contiguous"));
    }
    Ok(())
}

/// One parallel chunk: the parameter's, the gradient's and the states' elements.
type Chunk<'a, T> = (&'a mut [T], &'a [T], Vec<&'a mut [T]>);

/// The per-chunk body of a fused update: the parameter's elements, the
/// gradient's, and the state tensors' (in the order they were given).
pub(crate) trait Body<T>: Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync {}
impl<T, F: Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync> Body<T> for F {}

/// Runs `body` over the elements of `param` (written), `grad` (read) and
/// `states` (written), all dense CPU tensors of element type `T` with the
/// same element count; bumps the version of every written tensor.
///
/// Errors (as `Err(detail)`) for a tensor of another dtype, count or
/// device, a non-contiguous one, a read-only storage, or a state tensor
/// sharing storage with another written tensor. A gradient sharing the
/// parameter's storage is read from a copy.
pub(crate) fn fused<T: Float>(
    param: &Tensor,
    grad: &Tensor,
    states: &[&Tensor],
    body: impl Body<T>,
) -> std::result::Result<(), String> {
    let n = param.numel();
    check::<T>("the parameter", param, n)?;
    check::<T>("its gradient", grad, n)?;
    for s in states {
        check::<T>("a state tensor", s, n)?;
    }
    let written: Vec<&Tensor> = std::iter::once(param).chain(states.iter().copied()).collect();
    for (i, a) in written.iter().enumerate() {
        if a.storage().is_read_only() {
            return Err("a tensor to update is read-only".into());
        }
        if written[..i].iter().any(|b| b.storage().same(a.storage())) {
            return Err("two tensors to update share one storage".into());
        }
    }
    if n == 0 {
        return Ok(());
    }
    // Meta tensors (memory planning): the state exists, nothing is computed.
    if let Some(t) = std::iter::once(grad)
        .chain(written.iter().copied())
        .find(|t| t.device() != param.device())
    {
        return Err(format!(
            "tensors on {} and {} in one update",
            param.device(),
            t.device()
        ));
    }
    if param.device() == Device::Meta {
        return Ok(());
    }
    // A gradient aliasing a written tensor (`p.grad = p`) is read from a copy.
    let grad_alias = written.iter().any(|w| w.storage().same(grad.storage()));
    let grad_copy = if grad_alias {
        grad.to_vec::<T>().map_err(|e| e.to_string())?
    } else {
        Vec::new()
    };

    // Lock in storage address order.
    let mut order: Vec<(usize, &Tensor, bool)> = written.iter().map(|t| (t.storage().id(), *t, true)).collect();
    if !grad_alias {
        order.push((grad.storage().id(), grad, false));
    }
    order.sort_by_key(|(id, _, _)| *id);
    let mut guards: Vec<(&Tensor, Guard<'_>)> = Vec::with_capacity(order.len());
    for (_, t, write) in &order {
        let g = if *write {
            Guard::Write(t.storage().write())
        } else {
            Guard::Read(t.storage().read())
        };
        guards.push((t, g));
    }
    let base = |t: &Tensor| -> std::result::Result<*mut T, String> {
        let (_, g) = guards
            .iter()
            .find(|(u, _)| std::ptr::eq(*u, t))
            .ok_or("internal: unlocked tensor")?;
        let buf = match g {
            Guard::Read(b) => b.as_cpu(),
            Guard::Write(b) => b.as_cpu(),
        }
        .ok_or("the tensor's memory is not host memory")?;
        let bytes = t.layout().offset.checked_mul(size_of::<T>()).ok_or("offset overflow")?;
        let end = bytes.checked_add(n * size_of::<T>()).ok_or("size overflow")?;
        if end > buf.len() {
            return Err("the tensor's elements lie past its storage".into());
        }
        // SAFETY: `bytes + n * size_of::<T>() <= buf.len()` (checked above),
        // so the offset stays inside the block.
        let ptr = unsafe { buf.as_ptr().add(bytes) }.cast::<T>();
        if !ptr.is_aligned() {
            return Err("the tensor's elements are not aligned".into());
        }
        Ok(ptr)
    };
    let p_ptr = base(param)?;
    let g_ptr = if grad_alias {
        grad_copy.as_ptr().cast_mut()
    } else {
        base(grad)?
    };
    let s_ptrs: Vec<*mut T> = states.iter().map(|s| base(s)).collect::<std::result::Result<_, _>>()?;

    // Why the slices below are sound: each pointer addresses `n`
    // initialised, aligned elements of type `T` inside its storage's block
    // (checked in `base`; CPU buffers are always initialised). The written
    // tensors have distinct storages (checked above), each held under its
    // write lock in `guards` until this function returns, so the mutable
    // slices are the only access to that memory and do not overlap each
    // other; the gradient is read under its read lock (or is the local
    // copy), and does not share a storage with a written tensor.
    // SAFETY: see above: the parameter's `n` elements, write-locked, unaliased.
    let p: &mut [T] = unsafe { std::slice::from_raw_parts_mut(p_ptr, n) };
    // SAFETY: as above (read-only access to the gradient or its copy).
    let g: &[T] = unsafe { std::slice::from_raw_parts(g_ptr, n) };
    let mut s: Vec<&mut [T]> = s_ptrs
        .into_iter()
        // SAFETY: as above: distinct storages, write-locked, `n` elements each.
        .map(|ptr| unsafe { std::slice::from_raw_parts_mut(ptr, n) })
        .collect();

    if n < 2 * CHUNK || rayon::current_num_threads() == 1 {
        body(p, g, &mut s);
    } else {
        let mut state_chunks: Vec<_> = s.iter_mut().map(|x| x.chunks_mut(CHUNK)).collect();
        let work: Vec<Chunk<'_, T>> = p
            .chunks_mut(CHUNK)
            .zip(g.chunks(CHUNK))
            .map(|(pc, gc)| {
                let sc = state_chunks.iter_mut().filter_map(Iterator::next).collect();
                (pc, gc, sc)
            })
            .collect();
        work.into_par_iter().for_each(|(pc, gc, mut sc)| body(pc, gc, &mut sc));
    }
    drop(guards);
    for t in &written {
        t.bump_version();
    }
    Ok(())
}

/// The gradient of `param` as the update reads it: `None` when it has
/// none; the tensor made contiguous otherwise.
pub(crate) fn grad_of(param: &Tensor) -> Result<Option<Tensor>> {
    match param.grad_opt() {
        None => Ok(None),
        Some(g) if g.is_contiguous() => Ok(Some(g)),
        Some(g) => Ok(Some(g.contiguous()?)),
    }
}

/// Runs a fused update on `param`, through a contiguous copy written back
/// when the parameter itself is not contiguous.
pub(crate) fn update_param(
    optimizer: &'static str,
    index: usize,
    param: &Tensor,
    grad: &Tensor,
    states: &[&Tensor],
    f32_body: impl Body<f32>,
    f64_body: impl Body<f64>,
) -> Result<()> {
    let err = |detail: String| Error::Parameter {
        optimizer,
        index,
        detail,
    };
    if grad.shape() != param.shape() {
        return Err(err(format!(
            "its gradient has shape {:?}, the parameter {:?}",
            grad.shape(),
            param.shape()
        )));
    }
    let target = if param.is_contiguous() {
        param.clone()
    } else {
        param.detach().contiguous()?
    };
    match param.dtype() {
        DType::F32 => fused::<f32>(&target, grad, states, f32_body),
        DType::F64 => fused::<f64>(&target, grad, states, f64_body),
        other => Err(format!("dtype {other} is not supported (float32 and float64 are)")),
    }
    .map_err(err)?;
    if !param.is_contiguous() {
        ferrotorch_core::autograd::no_grad(|| param.copy_(&target))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Float;

    /// `Float::lerp` rounds as `torch.lerp` on CPU: from `self` for
    /// `|weight| < 0.5`, from `end` otherwise (the other form differs in
    /// the last bit on some of these). PyTorch 2.15's f32 results for
    /// `torch.lerp(a, b, w)`.
    #[test]
    fn lerp_rounds_as_atens_cpu_kernel() {
        let a = [0.1f32, 1.3, -2.7, 0.33];
        let b = [0.7f32, -0.2, 5.1, 0.35];
        let cases: [(f32, [f64; 4]); 3] = [
            (
                0.3,
                [
                    0.280_000_001_192_092_9,
                    0.849_999_904_632_568_4,
                    -0.359_999_895_095_825_2,
                    0.335_999_995_470_047,
                ],
            ),
            (
                0.7,
                [
                    0.519_999_980_926_513_7,
                    0.25,
                    2.759_999_752_044_677_7,
                    0.344_000_011_682_510_4,
                ],
            ),
            // A weight of exactly 0.5 takes the form from `end`.
            (
                0.5,
                [
                    0.400_000_005_960_464_5,
                    0.550_000_011_920_929,
                    1.199_999_809_265_136_7,
                    0.340_000_003_576_278_7,
                ],
            ),
        ];
        for (w, want) in cases {
            for i in 0..4 {
                let got = a[i].lerp(b[i], w);
                assert_eq!(
                    got.to_bits(),
                    (want[i] as f32).to_bits(),
                    "lerp({}, {}, {w}): {got}",
                    a[i],
                    b[i]
                );
            }
        }
    }
}
