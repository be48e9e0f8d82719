//! PyTorch's object collectives: `broadcast_object_list`,
//! `all_gather_object`, `gather_object` and `scatter_object_list`.
//!
//! Objects are values of ferrotorch's pickle object model
//! ([`Value`]: what `torch.save` writes and `torch.load` reads, tensors
//! included). As in PyTorch, each travels as its serialized bytes (here a
//! `torch.save` archive): the lengths go first (an all-gather, broadcast or
//! scatter of `int64`s), then the bytes, padded to the longest, as a
//! `uint8` tensor. The lists have PyTorch's shapes: `object_list` of
//! `all_gather_object` holds one entry per rank, the gather list exists on
//! the destination only, the scatter list on the source only; a list of
//! the wrong length is an error naming the call before anything is sent
//! (the other ranks then meet the group's timeout, which names this rank).

use ferrotorch_core::{DType, Tensor, TensorOptions};
use ferrotorch_serialize::Value;

use crate::error::{DistError, Result};
use crate::group::ProcessGroup;
use crate::init::default_group;

/// `obj` as `torch.save` bytes.
fn pickle(op: &str, obj: &Value) -> Result<Vec<u8>> {
    ferrotorch_serialize::save_to_bytes(obj)
        .map_err(|e| DistError::InvalidArgument(format!("{op}: the object cannot be serialized: {e}")))
}

/// The object in `bytes` (from another rank).
fn unpickle(op: &str, bytes: &[u8]) -> Result<Value> {
    ferrotorch_serialize::load_from_bytes(bytes)
        .map_err(|e| DistError::Collective(format!("{op}: a received object does not load: {e}")))
}

/// An `int64` tensor of `vals`.
fn lengths(vals: &[usize]) -> Result<Tensor> {
    Ok(Tensor::new(vals.iter().map(|&v| v as i64).collect::<Vec<_>>())?)
}

/// The lengths in an `int64` tensor (each checked: a negative length is a
/// corrupt message).
fn read_lengths(op: &str, t: &Tensor) -> Result<Vec<usize>> {
    t.to_vec::<i64>()?
        .into_iter()
        .map(|v| usize::try_from(v).map_err(|_| DistError::Collective(format!("{op}: a rank sent the length {v}"))))
        .collect()
}

/// `bytes` padded with zeros to `len`, as a `uint8` tensor.
fn padded(bytes: &[u8], len: usize) -> Result<Tensor> {
    let mut v = bytes.to_vec();
    v.resize(len, 0);
    Ok(Tensor::from_vec(v, [len])?)
}

fn zeros(dtype: DType, len: usize) -> Result<Tensor> {
    Ok(TensorOptions::new().dtype(dtype).zeros([len])?)
}

/// The check PyTorch makes of a list's length.
fn expect_len(op: &str, what: &str, got: usize, want: usize) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(DistError::InvalidArgument(format!(
            "{op}: {what} has {got} entries; it must have one per rank of the group ({want})"
        )))
    }
}

impl ProcessGroup {
    /// Every rank's `len`, in rank order (an all-gather of `int64`s).
    fn all_lengths(&self, op: &str, len: usize) -> Result<Vec<usize>> {
        let sizes: Vec<Tensor> = (0..self.size()).map(|_| zeros(DType::I64, 1)).collect::<Result<_>>()?;
        self.all_gather(&sizes, &lengths(&[len])?)?.wait()?;
        sizes.iter().map(|t| read_lengths(op, t).map(|v| v[0])).collect()
    }

    /// `dist.all_gather_object(object_list, obj)`: `object_list[r]` becomes
    /// rank `r`'s `obj`. An error when `object_list` does not have one entry
    /// per rank, when `obj` cannot be serialized, or the collectives' error.
    pub fn all_gather_object(&self, object_list: &mut [Value], obj: &Value) -> Result<()> {
        const OP: &str = "all_gather_object";
        let n = self.size();
        expect_len(OP, "object_list", object_list.len(), n)?;
        let bytes = pickle(OP, obj)?;
        let sizes = self.all_lengths(OP, bytes.len())?;
        let longest = sizes.iter().copied().max().unwrap_or(0);
        let all = zeros(DType::U8, n * longest)?;
        self.all_gather_into_tensor(&all, &padded(&bytes, longest)?)?.wait()?;
        let all = all.to_vec::<u8>()?;
        for (r, (slot, len)) in object_list.iter_mut().zip(sizes).enumerate() {
            *slot = unpickle(OP, &all[r * longest..r * longest + len])?;
        }
        Ok(())
    }

    /// `dist.broadcast_object_list(object_list, src)`: every rank's
    /// `object_list` becomes `src`'s (every rank passes a list of the same
    /// length). An error when `src`'s objects cannot be serialized, or the
    /// collectives' error.
    pub fn broadcast_object_list(&self, object_list: &mut [Value], src: usize) -> Result<()> {
        const OP: &str = "broadcast_object_list";
        let me = self.rank() == src;
        let encoded = if me {
            object_list.iter().map(|o| pickle(OP, o)).collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let sizes = if me {
            lengths(&encoded.iter().map(Vec::len).collect::<Vec<_>>())?
        } else {
            zeros(DType::I64, object_list.len())?
        };
        self.broadcast(&sizes, src)?.wait()?;
        let sizes = read_lengths(OP, &sizes)?;
        let total = sizes.iter().sum();
        let bytes = if me {
            Tensor::from_vec(encoded.concat(), [total])?
        } else {
            zeros(DType::U8, total)?
        };
        self.broadcast(&bytes, src)?.wait()?;
        if !me {
            let bytes = bytes.to_vec::<u8>()?;
            let mut at = 0;
            for (slot, len) in object_list.iter_mut().zip(sizes) {
                *slot = unpickle(OP, &bytes[at..at + len])?;
                at += len;
            }
        }
        Ok(())
    }

    /// `dist.gather_object(obj, object_gather_list, dst)`: on `dst`,
    /// `object_gather_list[r]` becomes rank `r`'s `obj`; the other ranks
    /// pass `None`. An error when `dst`'s list is missing or does not have
    /// one entry per rank, when `obj` cannot be serialized, or the
    /// collectives' error.
    pub fn gather_object(&self, obj: &Value, object_gather_list: Option<&mut [Value]>, dst: usize) -> Result<()> {
        const OP: &str = "gather_object";
        let n = self.size();
        let me = self.rank() == dst;
        if me {
            let got = object_gather_list.as_ref().map(|l| l.len());
            let Some(got) = got else {
                return Err(DistError::InvalidArgument(format!(
                    "{OP}: the destination rank {dst} must pass object_gather_list"
                )));
            };
            expect_len(OP, "object_gather_list", got, n)?;
        }
        let bytes = pickle(OP, obj)?;
        // Every rank needs the longest length to pad to (PyTorch gathers
        // the lengths to all ranks too).
        let sizes = self.all_lengths(OP, bytes.len())?;
        let longest = sizes.iter().copied().max().unwrap_or(0);
        let outputs: Vec<Tensor> = if me {
            (0..n).map(|_| zeros(DType::U8, longest)).collect::<Result<_>>()?
        } else {
            Vec::new()
        };
        self.gather(&padded(&bytes, longest)?, &outputs, dst)?.wait()?;
        if let Some(list) = object_gather_list.filter(|_| me) {
            for ((slot, out), len) in list.iter_mut().zip(&outputs).zip(sizes) {
                *slot = unpickle(OP, &out.to_vec::<u8>()?[..len])?;
            }
        }
        Ok(())
    }

    /// `dist.scatter_object_list(scatter_object_output_list,
    /// scatter_object_input_list, src)`: `output[0]` becomes `src`'s
    /// `input[rank]`; only `src` passes an input list (one entry per rank).
    /// An error when `output` is empty, when `src`'s list is missing or of
    /// the wrong length, when an object cannot be serialized, or the
    /// collectives' error.
    pub fn scatter_object_list(&self, output: &mut [Value], input: Option<&[Value]>, src: usize) -> Result<()> {
        const OP: &str = "scatter_object_list";
        let n = self.size();
        let me = self.rank() == src;
        if output.is_empty() {
            return Err(DistError::InvalidArgument(format!(
                "{OP}: scatter_object_output_list must have at least one entry"
            )));
        }
        let encoded = if me {
            let Some(input) = input else {
                return Err(DistError::InvalidArgument(format!(
                    "{OP}: the source rank {src} must pass scatter_object_input_list"
                )));
            };
            expect_len(OP, "scatter_object_input_list", input.len(), n)?;
            input.iter().map(|o| pickle(OP, o)).collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let longest = lengths(&[encoded.iter().map(Vec::len).max().unwrap_or(0)])?;
        self.broadcast(&longest, src)?.wait()?;
        let longest = read_lengths(OP, &longest)?[0];
        let (size_in, bytes_in) = if me {
            (
                encoded
                    .iter()
                    .map(|b| lengths(&[b.len()]))
                    .collect::<Result<Vec<_>>>()?,
                encoded.iter().map(|b| padded(b, longest)).collect::<Result<Vec<_>>>()?,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let size = zeros(DType::I64, 1)?;
        self.scatter(&size, &size_in, src)?.wait()?;
        let bytes = zeros(DType::U8, longest)?;
        self.scatter(&bytes, &bytes_in, src)?.wait()?;
        let len = read_lengths(OP, &size)?[0];
        if len > longest {
            return Err(DistError::Collective(format!(
                "{OP}: rank {src} sent an object of {len} bytes in a message of {longest}"
            )));
        }
        output[0] = unpickle(OP, &bytes.to_vec::<u8>()?[..len])?;
        Ok(())
    }
}

/// [`ProcessGroup::all_gather_object`] on the default group.
///
/// ```
/// use std::sync::Arc;
/// use ferrotorch_distributed::{HashStore, InitOptions, all_gather_object, destroy_process_group, init_process_group};
/// use ferrotorch_serialize::{Dict, Value};
/// init_process_group(InitOptions::new("tcp").world_size(1).rank(0).store(Arc::new(HashStore::new())))?;
/// let mut metrics = Dict::new();
/// metrics.insert("loss", 0.25);
/// let mut all = vec![Value::None; 1];
/// all_gather_object(&mut all, &Value::Dict(metrics))?;
/// assert!(matches!(&all[0], Value::Dict(d) if d.get_str("loss").is_some()));
/// destroy_process_group();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn all_gather_object(object_list: &mut [Value], obj: &Value) -> Result<()> {
    default_group()?.all_gather_object(object_list, obj)
}

/// [`ProcessGroup::broadcast_object_list`] on the default group.
pub fn broadcast_object_list(object_list: &mut [Value], src: usize) -> Result<()> {
    default_group()?.broadcast_object_list(object_list, src)
}

/// [`ProcessGroup::gather_object`] on the default group.
pub fn gather_object(obj: &Value, object_gather_list: Option<&mut [Value]>, dst: usize) -> Result<()> {
    default_group()?.gather_object(obj, object_gather_list, dst)
}

/// [`ProcessGroup::scatter_object_list`] on the default group.
pub fn scatter_object_list(output: &mut [Value], input: Option<&[Value]>, src: usize) -> Result<()> {
    default_group()?.scatter_object_list(output, input, src)
}
