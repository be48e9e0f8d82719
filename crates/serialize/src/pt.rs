//! `torch.save`'s zip archive (PyTorch >= 1.6): `<name>/data.pkl` (the
//! pickle), `<name>/data/<key>` (one entry per storage, raw little-endian
//! bytes), `<name>/byteorder`, `<name>/version` and, since PyTorch 2.x,
//! `.format_version`, `.storage_alignment` and `.data/serialization_id`.
//! Entries are stored uncompressed, each one's data 64-byte aligned.

use std::io::{Cursor, Seek, Write};

use ferrotorch_core::DType;
use ferrotorch_core::backend::storage::Storage;
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

use crate::error::{Error, Result};
use crate::pickle::{reader, writer};
use crate::tensor_io::{Backing, check_host_little_endian, meta_storage, with_storage_bytes};
use crate::value::Value;

/// The first bytes of a zip archive (a local file header).
const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
/// The first bytes of a legacy `torch.save` file: protocol 2, then
/// `LONG1` of the 10-byte magic number 0x1950a86a20f9469cfc6c.
const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
/// Alignment of each entry's data, as PyTorch writes it.
const ALIGNMENT: u16 = 64;
/// The archive folder name PyTorch uses when it writes to a buffer.
const ARCHIVE: &str = "archive";

/// What kind of file `bytes` starts like.
pub(crate) enum Kind {
    /// A zip archive (`torch.save`'s format, or a TorchScript archive).
    Zip,
    /// A legacy `torch.save` pickle stream.
    Legacy,
    /// A safetensors file (8-byte header length, then `{`).
    Safetensors,
    /// Anything else.
    Unknown,
}

/// Sniffs the format from the first bytes.
pub(crate) fn kind(bytes: &[u8]) -> Kind {
    if bytes.starts_with(ZIP_MAGIC) {
        Kind::Zip
    } else if bytes.starts_with(LEGACY_MAGIC) {
        Kind::Legacy
    } else if bytes.len() >= 9 && bytes[8] == b'{' {
        Kind::Safetensors
    } else {
        Kind::Unknown
    }
}

/// A stored entry's bytes, located through the zip directory.
fn entry<'a>(archive: &mut zip::ZipArchive<Cursor<&'a [u8]>>, bytes: &'a [u8], name: &str) -> Result<&'a [u8]> {
    let i = archive
        .index_for_name(name)
        .ok_or_else(|| Error::format(format!("the archive has no entry {name}")))?;
    let f = archive
        .by_index_raw(i)
        .map_err(|e| Error::format(format!("zip entry {name}: {e}")))?;
    if f.compression() != CompressionMethod::Stored {
        return Err(Error::Unsupported(format!(
            "zip entry {name} is compressed ({}); torch.save stores entries uncompressed",
            f.compression()
        )));
    }
    if f.size() != f.compressed_size() {
        return Err(Error::format(format!("zip entry {name}: stored sizes disagree")));
    }
    let start = f
        .data_start()
        .ok_or_else(|| Error::format(format!("zip entry {name}: no data offset")))?;
    let range = usize::try_from(start)
        .ok()
        .zip(usize::try_from(f.size()).ok())
        .and_then(|(s, n)| Some(s..s.checked_add(n)?))
        .filter(|r| r.end <= bytes.len())
        .ok_or_else(|| Error::format(format!("zip entry {name} runs past the end of the file (truncated?)")))?;
    Ok(&bytes[range])
}

/// An opened `torch.save` archive: its zip directory, the folder name
/// prefix of its entries (`archive/`) and the pickle.
struct Opened<'a> {
    archive: zip::ZipArchive<Cursor<&'a [u8]>>,
    prefix: String,
    pickle: &'a [u8],
}

/// Checks the format of `bytes` (the whole file), opens the zip directory
/// and locates and checks `data.pkl`, `byteorder` and `version`. Reads no
/// storage entry.
fn open(bytes: &[u8]) -> Result<Opened<'_>> {
    match kind(bytes) {
        Kind::Zip => {}
        Kind::Legacy => return Err(Error::LegacyFormat),
        Kind::Safetensors => {
            return Err(Error::format(
                "this is a safetensors file, not a torch.save checkpoint (use load_safetensors)",
            ));
        }
        Kind::Unknown if bytes.len() < ZIP_MAGIC.len() => {
            return Err(Error::format(format!(
                "not a torch.save checkpoint: the file has {} bytes (empty or truncated)",
                bytes.len()
            )));
        }
        Kind::Unknown => {
            return Err(Error::format(format!(
                "not a torch.save checkpoint: it starts with {:02x?}, not a zip archive's PK\\x03\\x04",
                &bytes[..bytes.len().min(8)]
            )));
        }
    }
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| Error::format(format!("not a readable zip archive (truncated?): {e}")))?;
    let names: Vec<String> = archive
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.to_string()))
        .collect();
    let pkl = names
        .iter()
        .find(|n| n.ends_with("/data.pkl") && n.matches('/').count() == 1)
        .cloned();
    let Some(pkl) = pkl else {
        let torchscript = names
            .iter()
            .any(|n| n.ends_with("/constants.pkl") || n.contains("/code/"));
        return Err(Error::format(if torchscript {
            "a TorchScript archive (torch.jit.save), not a torch.save checkpoint".to_string()
        } else {
            "the zip archive has no <name>/data.pkl: not a torch.save checkpoint".to_string()
        }));
    };
    let prefix = pkl[..pkl.len() - "data.pkl".len()].to_string();
    if archive.index_for_name(&format!("{prefix}byteorder")).is_some() {
        let order = entry(&mut archive, bytes, &format!("{prefix}byteorder"))?;
        match order {
            b"little" => {}
            b"big" => return Err(Error::Unsupported("a big-endian checkpoint (byteorder = big)".into())),
            other => {
                return Err(Error::format(format!(
                    "byteorder entry holds {:?}",
                    String::from_utf8_lossy(&other[..other.len().min(16)])
                )));
            }
        }
    }
    for v in [format!("{prefix}version"), format!("{prefix}.data/version")] {
        if archive.index_for_name(&v).is_some() {
            let text = entry(&mut archive, bytes, &v)?;
            let ok = std::str::from_utf8(text).is_ok_and(|t| t.trim().parse::<u64>().is_ok());
            if !ok {
                return Err(Error::format(format!("{v} is not a version number")));
            }
        }
    }
    check_host_little_endian()?;
    let pickle = entry(&mut archive, bytes, &pkl)?;
    Ok(Opened {
        archive,
        prefix,
        pickle,
    })
}

/// Checks that a persistent id's storage key is a plain name.
fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Error::format(format!("storage key {key:?} is not a plain name")));
    }
    Ok(())
}

/// The byte size of a storage of `numel` elements of `dtype`.
fn storage_nbytes(key: &str, dtype: DType, numel: usize) -> Result<usize> {
    numel
        .checked_mul(dtype.element_size())
        .ok_or_else(|| Error::tensor(format!("storage {key}: {numel} elements overflow")))
}

/// Reads a `torch.save` checkpoint (the whole file), its storages
/// borrowing or copying the bytes as `backing` does.
pub(crate) fn read(mut backing: Backing<'_>) -> Result<Value> {
    let bytes = backing.bytes;
    let Opened {
        mut archive,
        prefix,
        pickle,
    } = open(bytes)?;
    reader::read(pickle, |key: &str, dtype: DType, numel: usize| -> Result<Storage> {
        check_key(key)?;
        let name = format!("{prefix}data/{key}");
        let raw = entry(&mut archive, bytes, &name)?;
        let want = storage_nbytes(key, dtype, numel)?;
        if raw.len() != want {
            return Err(Error::tensor(format!(
                "storage {key} should hold {numel} elements of {} ({want} bytes), the entry has {} bytes",
                dtype.name(),
                raw.len()
            )));
        }
        backing.storage(raw, dtype)
    })
}

/// A storage the pickle refers to, as [`read_pickle_only`] saw it.
pub(crate) struct StorageRef {
    /// Its key (the archive entry `data/<key>`).
    pub(crate) key: String,
    /// The meta storage standing in for it.
    pub(crate) storage: Storage,
}

/// Reads only the pickle of a `torch.save` checkpoint (`bytes` is the whole
/// file, whose storage entries are never looked at): every tensor of the
/// value lies on a meta storage of the size the pickle declares, with the
/// dtype, shape, strides, offset and `requires_grad` of the file. Also
/// returns the storages in the order the pickle first refers to them.
pub(crate) fn read_pickle_only(bytes: &[u8]) -> Result<(Value, Vec<StorageRef>)> {
    let opened = open(bytes)?;
    let mut storages = Vec::new();
    let value = reader::read(
        opened.pickle,
        |key: &str, dtype: DType, numel: usize| -> Result<Storage> {
            check_key(key)?;
            let storage = meta_storage(storage_nbytes(key, dtype, numel)?, dtype)?;
            storages.push(StorageRef {
                key: key.to_string(),
                storage: storage.clone(),
            });
            Ok(storage)
        },
    )?;
    Ok((value, storages))
}

/// Writes `value` as `torch.save` does to `out` (a file or a buffer).
pub(crate) fn write<W: Write + Seek>(value: &Value, out: W) -> Result<W> {
    check_host_little_endian()?;
    let mut table = writer::StorageTable::default();
    let pkl = writer::write(value, &mut table)?;
    let zerr = |e: zip::result::ZipError| match e {
        zip::result::ZipError::Io(io) => Error::Io {
            path: "<checkpoint>".into(),
            source: io,
        },
        other => Error::format(format!("writing the zip archive: {other}")),
    };
    let ioerr = |e: std::io::Error| Error::Io {
        path: "<checkpoint>".into(),
        source: e,
    };
    let mut zip = zip::ZipWriter::new(out);
    let options = |len: usize| {
        SimpleFileOptions::default()
            .compression_method(CompressionMethod::Stored)
            .with_alignment(ALIGNMENT)
            .large_file(len >= u32::MAX as usize)
    };
    let record = |zip: &mut zip::ZipWriter<W>, name: &str, data: &[u8]| -> Result<()> {
        zip.start_file(format!("{ARCHIVE}/{name}"), options(data.len()))
            .map_err(zerr)?;
        zip.write_all(data).map_err(ioerr)
    };
    record(&mut zip, "data.pkl", &pkl)?;
    record(&mut zip, ".format_version", b"1")?;
    record(&mut zip, ".storage_alignment", ALIGNMENT.to_string().as_bytes())?;
    record(&mut zip, "byteorder", b"little")?;
    // PyTorch writes the storages sorted by key as strings ("0", "1", "10", ...).
    let mut keys: Vec<usize> = (0..table.storages.len()).collect();
    keys.sort_by_key(|k| k.to_string());
    for k in keys {
        let (storage, _) = &table.storages[k];
        with_storage_bytes(storage, |b| record(&mut zip, &format!("data/{k}"), b))??;
    }
    record(&mut zip, "version", b"3\n")?;
    zip.finish().map_err(zerr)
}
