//! `Display` for tensors, following `torch/_tensor_str.py`: the same number
//! formats (fixed, integer-valued, scientific), widths, line wrapping,
//! summarisation of large tensors and `dtype=`/`device=` suffixes.

use std::fmt;
use std::sync::RwLock;

use crate::{DType, Device, Tensor};

/// Printing options (`torch.set_printoptions`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrintOptions {
    /// Digits after the decimal point.
    pub precision: usize,
    /// Tensors with more elements are summarised.
    pub threshold: usize,
    /// Items shown at each end of a summarised dim.
    pub edgeitems: usize,
    /// Characters per line.
    pub linewidth: usize,
    /// Force (`Some(true)`) or forbid scientific notation.
    pub sci_mode: Option<bool>,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions {
            precision: 4,
            threshold: 1000,
            edgeitems: 3,
            linewidth: 80,
            sci_mode: None,
        }
    }
}

static OPTIONS: RwLock<Option<PrintOptions>> = RwLock::new(None);

/// Sets how tensors print (global, as in PyTorch).
pub fn set_print_options(options: PrintOptions) {
    *OPTIONS.write().unwrap_or_else(|e| e.into_inner()) = Some(options);
}

fn options() -> PrintOptions {
    OPTIONS.read().unwrap_or_else(|e| e.into_inner()).unwrap_or_default()
}

#[derive(Clone, Copy)]
enum Val {
    F(f64),
    I(i64),
    B(bool),
}

struct Formatter {
    floating: bool,
    int_mode: bool,
    sci_mode: bool,
    max_width: usize,
    precision: usize,
}

/// Python's `{:.Ne}`: mantissa with `prec` digits and a signed exponent of at least two digits.
fn sci(v: f64, prec: usize) -> String {
    if !v.is_finite() {
        return py_nonfinite(v);
    }
    let s = format!("{v:.prec$e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

fn py_nonfinite(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

fn fixed(v: f64, prec: usize) -> String {
    if !v.is_finite() {
        return py_nonfinite(v);
    }
    format!("{v:.prec$}")
}

impl Formatter {
    fn new(vals: &[Val], floating: bool, opts: &PrintOptions) -> Self {
        let mut f = Formatter {
            floating,
            int_mode: true,
            sci_mode: false,
            max_width: 1,
            precision: opts.precision,
        };
        if !floating {
            for v in vals {
                f.max_width = f.max_width.max(plain(*v).len());
            }
        } else {
            let finite: Vec<f64> = vals
                .iter()
                .filter_map(|v| match v {
                    Val::F(x) if x.is_finite() && *x != 0.0 => Some(*x),
                    _ => None,
                })
                .collect();
            // As `_Formatter`: without a nonzero finite value the fixed
            // format stays (even with `sci_mode` set); otherwise the mode is
            // chosen first, PyTorch's rule or the option, then the width.
            if !finite.is_empty() {
                let amin = finite.iter().fold(f64::INFINITY, |a, x| a.min(x.abs()));
                let amax = finite.iter().fold(0.0f64, |a, x| a.max(x.abs()));
                f.int_mode = finite.iter().all(|x| *x == x.ceil());
                f.sci_mode = opts
                    .sci_mode
                    .unwrap_or(amax / amin > 1000.0 || amax > 1.0e8 || amin < 1.0e-4);
                let p = opts.precision;
                let width = |x: &f64| {
                    if f.sci_mode {
                        sci(*x, p).len()
                    } else if f.int_mode {
                        fixed(*x, 0).len() + 1
                    } else {
                        fixed(*x, p).len()
                    }
                };
                f.max_width = finite.iter().map(width).max().unwrap_or(1);
            }
        }
        f
    }

    fn format(&self, v: Val) -> String {
        let s = match v {
            Val::F(x) if self.floating => {
                if self.sci_mode {
                    sci(x, self.precision)
                } else if self.int_mode {
                    let mut s = fixed(x, 0);
                    if x.is_finite() {
                        s.push('.');
                    }
                    s
                } else {
                    fixed(x, self.precision)
                }
            }
            other => plain(other),
        };
        format!("{}{s}", " ".repeat(self.max_width.saturating_sub(s.len())))
    }
}

fn plain(v: Val) -> String {
    match v {
        Val::F(x) => format!("{x}"),
        Val::I(i) => format!("{i}"),
        Val::B(b) => if b { "True" } else { "False" }.into(),
    }
}

struct Data<'a> {
    vals: &'a [Val],
    shape: &'a [usize],
    strides: Vec<usize>,
}

impl Data<'_> {
    /// Indices shown along a dim of size `n`.
    fn shown(n: usize, summarize: bool, edge: usize) -> Vec<Option<usize>> {
        if summarize && n > 2 * edge {
            let mut v: Vec<Option<usize>> = (0..edge).map(Some).collect();
            v.push(None);
            v.extend((n - edge..n).map(Some));
            v
        } else {
            (0..n).map(Some).collect()
        }
    }

    fn collect(&self, dim: usize, base: usize, summarize: bool, edge: usize, out: &mut Vec<Val>) {
        if dim == self.shape.len() {
            out.push(self.vals[base]);
            return;
        }
        for i in Self::shown(self.shape[dim], summarize, edge).into_iter().flatten() {
            self.collect(dim + 1, base + i * self.strides[dim], summarize, edge, out);
        }
    }

    fn render(
        &self,
        dim: usize,
        base: usize,
        indent: usize,
        summarize: bool,
        fmt: &Formatter,
        opts: &PrintOptions,
    ) -> String {
        let nd = self.shape.len();
        if dim == nd {
            return fmt.format(self.vals[base]);
        }
        let shown = Self::shown(self.shape[dim], summarize, opts.edgeitems);
        if dim + 1 == nd {
            let elem_len = fmt.max_width + 2;
            let per_line = ((opts.linewidth.saturating_sub(indent)) / elem_len).max(1);
            let items: Vec<String> = shown
                .iter()
                .map(|i| match i {
                    Some(i) => fmt.format(self.vals[base + i * self.strides[dim]]),
                    None => " ...".to_string(),
                })
                .collect();
            let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
            return format!("[{}]", lines.join(&format!(",\n{}", " ".repeat(indent + 1))));
        }
        let parts: Vec<String> = shown
            .iter()
            .map(|i| match i {
                Some(i) => self.render(dim + 1, base + i * self.strides[dim], indent + 1, summarize, fmt, opts),
                None => "...".to_string(),
            })
            .collect();
        let sep = format!(",{}{}", "\n".repeat(nd - dim - 1), " ".repeat(indent + 1));
        format!("[{}]", parts.join(&sep))
    }
}

fn values(t: &Tensor) -> crate::Result<Vec<Val>> {
    Ok(match t.dtype() {
        DType::Bool => t.to_vec::<bool>()?.into_iter().map(Val::B).collect(),
        d if d.is_floating_point() => t.to_vec::<f64>()?.into_iter().map(Val::F).collect(),
        _ => t.to_vec::<i64>()?.into_iter().map(Val::I).collect(),
    })
}

fn add_suffixes(body: String, suffixes: &[String], indent: usize, linewidth: usize) -> String {
    let mut out = body;
    let mut last_line_len = out.len() - out.rfind('\n').map_or(0, |p| p) + 1;
    for s in suffixes {
        if last_line_len + s.len() + 2 > linewidth {
            out.push_str(&format!(",\n{}{s}", " ".repeat(indent)));
            last_line_len = indent + s.len();
        } else {
            out.push_str(&format!(", {s}"));
            last_line_len += s.len() + 2;
        }
    }
    out.push(')');
    out
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opts = options();
        let prefix = "tensor(";
        let indent = prefix.len();
        let mut suffixes = Vec::new();
        if self.device() != Device::Cpu {
            suffixes.push(format!("device='{}'", self.device()));
        }
        let default_dtype = matches!(self.dtype(), DType::I64 | DType::Bool) || self.dtype() == crate::default_dtype();
        let body = if self.device() == Device::Meta {
            suffixes.push(format!("size={}", py_tuple(self.shape())));
            if !default_dtype {
                suffixes.push(format!("dtype=torch.{}", self.dtype()));
            }
            "...".to_string()
        } else if self.numel() == 0 {
            if self.ndim() != 1 {
                suffixes.push(format!("size={}", py_tuple(self.shape())));
            }
            if self.dtype() != crate::default_dtype() {
                suffixes.push(format!("dtype=torch.{}", self.dtype()));
            }
            "[]".to_string()
        } else {
            if !default_dtype {
                suffixes.push(format!("dtype=torch.{}", self.dtype()));
            }
            let vals = match values(self) {
                Ok(v) => v,
                Err(e) => return write!(f, "tensor(<unreadable: {e}>)"),
            };
            let data = Data {
                vals: &vals,
                shape: self.shape(),
                strides: crate::layout::contiguous_strides(self.shape()).to_vec(),
            };
            let summarize = self.numel() > opts.threshold;
            let mut shown = Vec::new();
            data.collect(0, 0, summarize, opts.edgeitems, &mut shown);
            let fmtr = Formatter::new(&shown, self.dtype().is_floating_point(), &opts);
            data.render(0, 0, indent, summarize, &fmtr, &opts)
        };
        if let Some(node) = self.grad_fn() {
            suffixes.push(format!("grad_fn=<{}>", node.name()));
        } else if self.requires_grad() {
            suffixes.push("requires_grad=True".into());
        }
        f.write_str(&add_suffixes(
            format!("{prefix}{body}"),
            &suffixes,
            indent,
            opts.linewidth,
        ))
    }
}

fn py_tuple(shape: &[usize]) -> String {
    match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TensorOptions;

    #[test]
    fn prints_like_pytorch() {
        let t = Tensor::new([[1.0f32, 2.5], [3.0, 4.0]]).unwrap();
        assert_eq!(t.to_string(), "tensor([[1.0000, 2.5000],\n        [3.0000, 4.0000]])");
        let t = Tensor::new([1.0f32, 2.0, 3.0]).unwrap();
        assert_eq!(t.to_string(), "tensor([1., 2., 3.])");
        let t = Tensor::new([1i64, -20, 3]).unwrap();
        assert_eq!(t.to_string(), "tensor([  1, -20,   3])");
        let t = Tensor::new([1.0f64, 1e-5]).unwrap();
        assert_eq!(t.to_string(), "tensor([1.0000e+00, 1.0000e-05], dtype=torch.float64)");
        let t = Tensor::new([true, false]).unwrap();
        assert_eq!(t.to_string(), "tensor([ True, False])");
        let t = Tensor::scalar(3.5f32);
        assert_eq!(t.to_string(), "tensor(3.5000)");
        let t = Tensor::new([f32::NAN, f32::INFINITY, 1.0]).unwrap();
        assert_eq!(t.to_string(), "tensor([nan, inf, 1.])");
        let t = Tensor::zeros([0, 3]).unwrap();
        assert_eq!(t.to_string(), "tensor([], size=(0, 3))");
        let t = TensorOptions::new().device(Device::Meta).zeros([2, 3]).unwrap();
        assert_eq!(t.to_string(), "tensor(..., device='meta', size=(2, 3))");
        let x = Tensor::new([1.0f32, 2.0]).unwrap().requires_grad_(true).unwrap();
        assert_eq!(x.to_string(), "tensor([1., 2.], requires_grad=True)");
        assert_eq!(
            x.mul(&x).unwrap().to_string(),
            "tensor([1., 4.], grad_fn=<MulBackward0>)"
        );
        assert_eq!(x.sum().unwrap().to_string(), "tensor(3., grad_fn=<SumBackward0>)");
    }

    #[test]
    fn summarises_large_tensors() {
        let t = Tensor::arange(2000).unwrap();
        assert_eq!(t.to_string(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
        let t = Tensor::arange(10000).unwrap().reshape([100, 100]).unwrap();
        let s = t.to_string();
        assert!(
            s.starts_with("tensor([[   0,    1,    2,  ...,   97,   98,   99],"),
            "{s}"
        );
        assert!(s.contains("\n        ...,\n"), "{s}");
    }
}
