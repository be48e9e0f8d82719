//! CPU kernels of `nll_loss` / `nll_loss2d` and their derivatives.
//!
//! The forward reads one value per sample and sums them in sample order
//! with PyTorch's cascade of partial sums (so a reduced loss has
//! PyTorch's bits); the derivative writes rows of the input's gradient in
//! parallel (each row zeroed, then its sample's target set), so results
//! do not depend on the thread count. f16 and bf16 compute in f32.

use super::access::access;
use super::warm::par_for_each;
use crate::dispatch::{Op, downcast_op};
use crate::ops::loss::{NllLoss, NllLossBackward, Reduction};
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// Layout of an nll input viewed as `[N, C, S]`.
#[derive(Clone, Copy)]
struct Geometry {
    n: usize,
    c: usize,
    s: usize,
}

fn geometry(shape: &[usize]) -> Geometry {
    match shape.len() {
        1 => Geometry {
            n: 1,
            c: shape[0],
            s: 1,
        },
        2 => Geometry {
            n: shape[0],
            c: shape[1],
            s: 1,
        },
        _ => Geometry {
            n: shape[0],
            c: shape[1],
            s: shape[2..].iter().product(),
        },
    }
}

/// `ceil(log2(x))` as PyTorch's `utils::CeilLog2` (1 for x <= 2).
fn ceil_log2(x: usize) -> usize {
    if x <= 2 {
        return 1;
    }
    (usize::BITS - (x - 1).leading_zeros()) as usize
}

/// The targets as int64, each checked against the class count unless it
/// is `ignore_index` (PyTorch's "Target 7 is out of bounds.", with the
/// class count added).
fn targets(name: &'static str, t: &Tensor, classes: usize, ignore: i64) -> Result<Vec<i64>> {
    let v = t.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
    for &k in &v {
        if k != ignore && !(0..classes as i64).contains(&k) {
            return Err(Error::invalid(
                name,
                format!("Target {k} is out of bounds. (expected a class index in [0, {classes}))"),
            ));
        }
    }
    Ok(v)
}

trait Num:
    Copy
    + Send
    + Sync
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    const ZERO: Self;
    fn of(v: f64) -> Self;
}

impl Num for f32 {
    const ZERO: f32 = 0.0;
    fn of(v: f64) -> f32 {
        v as f32
    }
}

impl Num for f64 {
    const ZERO: f64 = 0.0;
    fn of(v: f64) -> f64 {
        v
    }
}

pub(crate) fn nll_loss_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = *downcast_op::<NllLoss>(op)?;
    let x = inputs[0];
    match x.dtype() {
        DType::F32 => nll_typed::<f32>(&op, inputs, outputs),
        DType::F64 => nll_typed::<f64>(&op, inputs, outputs),
        DType::F16 | DType::BF16 => {
            let ins: Vec<Tensor> = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    if i == 1 {
                        Ok((*t).clone())
                    } else {
                        t.to_dtype(DType::F32)
                    }
                })
                .collect::<Result<_>>()?;
            let tmp: Vec<Tensor> = outputs
                .iter()
                .map(|o| TensorOptions::new().dtype(DType::F32).zeros(o.shape()))
                .collect::<Result<_>>()?;
            let (ir, tr): (Vec<&Tensor>, Vec<&Tensor>) = (ins.iter().collect(), tmp.iter().collect());
            nll_typed::<f32>(&op, &ir, &tr)?;
            for (o, t) in outputs.iter().zip(&tmp) {
                o.copy_(t)?;
            }
            Ok(())
        }
        d => Err(Error::dtype(
            op.entry().base_name(),
            d,
            "expects a floating-point input",
        )),
    }
}

fn nll_typed<T: Num + crate::Element>(op: &NllLoss, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let name = op.entry().base_name();
    let geo = geometry(inputs[0].shape());
    let tv = targets(name, inputs[1], geo.c, op.ignore_index)?;
    let x = inputs[0].contiguous()?;
    let w = op.weight.then(|| inputs[2].contiguous()).transpose()?;
    let mut ins = vec![&x];
    if let Some(w) = &w {
        ins.push(w);
    }
    let acc = access(name, &ins, outputs)?;
    // SAFETY: the contiguous input holds n * c * s elements, the weight c;
    // the outputs have the shapes of `NllLoss::infer` and are written here
    // alone.
    let (xs, ws) = unsafe {
        (
            std::slice::from_raw_parts(acc.ins[0] as *const T, geo.n * geo.c * geo.s),
            w.as_ref()
                .map(|_| std::slice::from_raw_parts(acc.ins[1] as *const T, geo.c)),
        )
    };
    let value = |b: usize, s: usize, t: usize| xs[(b * geo.c + t) * geo.s + s];
    let numiter = geo.n * geo.s;
    // SAFETY: output 1 (total weight) is a scalar.
    let total_out = unsafe { &mut *(acc.outs[1] as *mut T) };
    if op.reduction == Reduction::None && outputs[0].ndim() > 0 {
        // SAFETY: the per-sample output has n * s elements.
        let out = unsafe { std::slice::from_raw_parts_mut(acc.outs[0] as *mut T, numiter) };
        for (i, o) in out.iter_mut().enumerate() {
            let k = tv[i];
            *o = if k == op.ignore_index {
                T::ZERO
            } else {
                let wv = ws.map_or(T::of(1.0), |w| w[k as usize]);
                -value(i / geo.s, i % geo.s, k as usize) * wv
            };
        }
        *total_out = T::ZERO;
        return Ok(());
    }
    // SAFETY: the reduced loss is a scalar.
    let out = unsafe { &mut *(acc.outs[0] as *mut T) };
    if tv.is_empty() {
        *out = if op.reduction == Reduction::Mean {
            T::of(f64::NAN)
        } else {
            T::ZERO
        };
        *total_out = T::ZERO;
        return Ok(());
    }
    // PyTorch's cascaded summation (LossNLL.cpp), step for step.
    const LEVELS: usize = 8;
    let level_power = 4.max(ceil_log2(numiter) / LEVELS);
    let level_mask = (1usize << level_power) - 1;
    let mut wsum = [T::ZERO; LEVELS];
    let mut lsum = [T::ZERO; LEVELS];
    let mut ignored = 0usize;
    for (i, &k) in tv.iter().enumerate() {
        if k == op.ignore_index {
            ignored += 1;
            continue;
        }
        let v = value(i / geo.s, i % geo.s, k as usize);
        match ws {
            Some(w) => {
                let wv = w[k as usize];
                lsum[0] = lsum[0] - v * wv;
                wsum[0] = wsum[0] + wv;
            }
            None => lsum[0] = lsum[0] - v,
        }
        for j in 0..LEVELS - 1 {
            let mask = level_mask << (j * level_power);
            if i & mask != 0 {
                break;
            }
            wsum[j + 1] = wsum[j + 1] + wsum[j];
            lsum[j + 1] = lsum[j + 1] + lsum[j];
            wsum[j] = T::ZERO;
            lsum[j] = T::ZERO;
        }
    }
    let total = match ws {
        Some(_) => wsum.iter().fold(T::ZERO, |a, &b| a + b),
        None => T::of((numiter - ignored) as f64),
    };
    let mut loss = lsum.iter().fold(T::ZERO, |a, &b| a + b);
    if op.reduction == Reduction::Mean {
        loss = loss / total;
    }
    *out = loss;
    *total_out = total;
    Ok(())
}

pub(crate) fn nll_loss_backward_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<NllLossBackward>(op)?;
    match inputs[0].dtype() {
        DType::F32 => nll_backward_typed::<f32>(op, inputs, outputs),
        DType::F64 => nll_backward_typed::<f64>(op, inputs, outputs),
        DType::F16 | DType::BF16 => {
            let ins: Vec<Tensor> = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    if i == 1 {
                        Ok((*t).clone())
                    } else {
                        t.to_dtype(DType::F32)
                    }
                })
                .collect::<Result<_>>()?;
            let tmp = TensorOptions::new().dtype(DType::F32).zeros(outputs[0].shape())?;
            let ir: Vec<&Tensor> = ins.iter().collect();
            nll_backward_typed::<f32>(op, &ir, &[&tmp])?;
            outputs[0].copy_(&tmp)?;
            Ok(())
        }
        d => Err(Error::dtype(op.entry().base_name(), d, "expects a floating-point grad")),
    }
}

fn nll_backward_typed<T: Num + crate::Element>(
    op: &NllLossBackward,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
) -> Result<()> {
    let name = op.entry().base_name();
    let loss = op.loss;
    let geo = geometry(&op.input_shape);
    let tv = targets(name, inputs[1], geo.c, loss.ignore_index)?;
    let per_sample = loss.reduction == Reduction::None && op.input_shape.len() > 1;
    let g = inputs[0].contiguous()?;
    let total = inputs[2].contiguous()?;
    let w = loss.weight.then(|| inputs[3].contiguous()).transpose()?;
    if (per_sample && g.numel() != tv.len()) || (!per_sample && g.numel() != 1) || total.numel() != 1 {
        return Err(Error::invalid(name, "grad or total_weight of the wrong size"));
    }
    let mut ins = vec![&g, &total];
    if let Some(w) = &w {
        ins.push(w);
    }
    let acc = access(name, &ins, outputs)?;
    let row = geo.c * geo.s;
    let numel = geo.n * row;
    let (gp, op_) = (acc.ins[0] as usize, acc.outs[0] as usize);
    // SAFETY: the total weight is one element, the weight `c`.
    let (tw, ws) = unsafe {
        (
            *(acc.ins[1] as *const T),
            w.as_ref()
                .map(|_| std::slice::from_raw_parts(acc.ins[2] as *const T, geo.c)),
        )
    };
    // SAFETY: a scalar grad unless per sample.
    let scalar_grad = (!per_sample).then(|| unsafe { *(gp as *const T) });
    let common = scalar_grad.map(|gv| {
        if loss.reduction == Reduction::Mean {
            -(gv / tw)
        } else {
            -gv
        }
    });
    let rows_per_task = (1usize << 14).div_ceil(row.max(1)).max(1);
    let tasks = geo.n.div_ceil(rows_per_task);
    let task = |k: usize| {
        let (b0, b1) = (k * rows_per_task, ((k + 1) * rows_per_task).min(geo.n));
        // SAFETY: task `k` writes rows b0..b1 of the output (n rows of c * s
        // elements), disjoint between tasks; grad reads are in bounds.
        unsafe {
            let out = std::slice::from_raw_parts_mut((op_ as *mut T).add(b0 * row), (b1 - b0) * row);
            out.fill(T::ZERO);
            for b in b0..b1 {
                for s in 0..geo.s {
                    let i = b * geo.s + s;
                    let t = tv[i];
                    if t == loss.ignore_index {
                        continue;
                    }
                    let gv = match common {
                        Some(c) => c,
                        None => -*(gp as *const T).add(i),
                    };
                    let wv = ws.map_or(gv, |w| w[t as usize] * gv);
                    out[(b - b0) * row + t as usize * geo.s + s] = wv;
                }
            }
        }
    };
    if tasks <= 1 || numel < 1 << 15 {
        (0..tasks).for_each(task);
    } else {
        par_for_each(tasks, task);
    }
    Ok(())
}
