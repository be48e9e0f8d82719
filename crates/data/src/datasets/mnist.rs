//! MNIST from its IDX files (torchvision's `datasets.MNIST`, without
//! the download).

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferrotorch_core::{Tensor, default_dtype};

use crate::dataset::Dataset;
use crate::error::{DataError, Result};
use crate::transforms::{ArcTransform, Transform};

/// The MNIST handwritten digits (torchvision's `datasets.MNIST`): 60,000
/// training or 10,000 test images of 28 x 28 grey pixels with their labels
/// 0-9.
///
/// The whole split is read once into one `u8` tensor `[N, 28, 28]`
/// ([`images`](Self::images)) and one int64 tensor `[N]`
/// ([`labels`](Self::labels)); an item is a view of one image, passed
/// through the transform when there is one, and its label:
/// `(image, label)` with the image `u8 [28, 28]` untransformed, or
/// `f32 [1, 28, 28]` after [`ToTensor`](crate::transforms::ToTensor).
/// Cloning shares the tensors.
///
/// ```no_run
/// use ferrotorch_data::datasets::MNIST;
/// use ferrotorch_data::transforms::{Compose, Normalize, ToTensor};
/// use ferrotorch_data::{DataLoader, Dataset};
/// let train = MNIST::new("data/mnist", true)?
///     .with_transform(Compose::new().then(ToTensor).then(Normalize::new([0.1307], [0.3081])));
/// let loader = DataLoader::builder(train).batch_size(64).shuffle(true).num_workers(2).build()?;
/// for batch in loader.iter()? {
///     let (images, labels) = batch?; // f32 [64, 1, 28, 28], int64 [64]
/// #   let _ = (images, labels);
/// }
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone)]
pub struct MNIST {
    images: Tensor,
    labels: Tensor,
    label_values: Arc<[u8]>,
    transform: Option<ArcTransform>,
}

impl fmt::Debug for MNIST {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MNIST(images={:?}, transform={})",
            self.images.shape(),
            if self.transform.is_some() { "set" } else { "none" }
        )
    }
}

impl MNIST {
    /// The class names, as torchvision's `MNIST.classes`.
    pub const CLASSES: [&'static str; 10] = [
        "0 - zero",
        "1 - one",
        "2 - two",
        "3 - three",
        "4 - four",
        "5 - five",
        "6 - six",
        "7 - seven",
        "8 - eight",
        "9 - nine",
    ];

    /// The training split (`train`) or the test split from the IDX files
    /// under `root`: `train-images-idx3-ubyte` and
    /// `train-labels-idx1-ubyte` (or `t10k-...`), gzipped (`.gz`) or not,
    /// also with the dotted names (`train-images.idx3-ubyte`), in `root`
    /// itself or in torchvision's layout `root/MNIST/raw`.
    ///
    /// Errors name the file and what is wrong: missing, unreadable, not
    /// gzip though named `.gz`, a bad gzip stream, a bad magic number,
    /// truncated or with bytes after the data, or image and label files of
    /// different lengths.
    pub fn new(root: impl AsRef<Path>, train: bool) -> Result<Self> {
        let root = root.as_ref();
        let prefix = if train { "train" } else { "t10k" };
        let images = find_file(root, &format!("{prefix}-images"), "idx3-ubyte")?;
        let labels = find_file(root, &format!("{prefix}-labels"), "idx1-ubyte")?;
        Self::from_files(images, labels)
    }

    /// The dataset of an image file and a label file, given by path.
    pub fn from_files(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<Self> {
        let (images_path, labels_path) = (images.as_ref(), labels.as_ref());
        let (image_dims, image_bytes) = read_idx(images_path, 3)?;
        let (label_dims, label_bytes) = read_idx(labels_path, 1)?;
        if image_dims[0] != label_dims[0] {
            return Err(DataError::Format {
                path: labels_path.to_path_buf(),
                detail: format!(
                    "{} labels, but {} has {} images",
                    label_dims[0],
                    images_path.display(),
                    image_dims[0]
                ),
            });
        }
        let label_values: Arc<[u8]> = label_bytes.into();
        let labels = Tensor::from_vec(label_values.iter().map(|&l| l as i64).collect(), label_dims[0])?;
        let images = Tensor::from_vec(image_bytes, image_dims)?;
        Ok(MNIST {
            images,
            labels,
            label_values,
            transform: None,
        })
    }

    /// The dataset with `transform` applied to each image.
    pub fn with_transform(mut self, transform: impl Transform + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// All images, `u8 [N, 28, 28]` (torchvision's `data`).
    pub fn images(&self) -> &Tensor {
        &self.images
    }

    /// All labels, int64 `[N]` (torchvision's `targets`).
    pub fn labels(&self) -> &Tensor {
        &self.labels
    }

    /// The label of image `index`.
    pub fn label(&self, index: usize) -> Option<i64> {
        self.label_values.get(index).map(|&l| l as i64)
    }

    /// All images through [`ToTensor`](crate::transforms::ToTensor) at once:
    /// `[N, 1, 28, 28]` in the default float dtype, pixel / 255, the same
    /// bits as the items: the fast path for keeping the whole split in
    /// memory as floats.
    pub fn images_float(&self) -> Result<Tensor> {
        Ok(self.images.unsqueeze(1)?.to_dtype(default_dtype())?.div(255.0)?)
    }
}

impl Dataset for MNIST {
    type Item = (Tensor, i64);

    fn len(&self) -> usize {
        self.label_values.len()
    }

    fn get(&self, index: usize) -> Result<(Tensor, i64)> {
        let label = self.label(index).ok_or(DataError::IndexOutOfRange {
            what: "MNIST",
            index,
            len: self.len(),
        })?;
        let image = self.images.select(0, index as i64)?;
        let image = match &self.transform {
            Some(t) => t.apply(&image)?,
            None => image,
        };
        Ok((image, label))
    }
}

/// The first of the usual names of an MNIST file that exists under `root`.
fn find_file(root: &Path, stem: &str, kind: &str) -> Result<PathBuf> {
    let dirs = [root.to_path_buf(), root.join("MNIST").join("raw"), root.join("raw")];
    let names = [
        format!("{stem}-{kind}"),
        format!("{stem}-{kind}.gz"),
        format!("{stem}.{kind}"),
        format!("{stem}.{kind}.gz"),
    ];
    for dir in &dirs {
        for name in &names {
            let p = dir.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(DataError::Io {
        path: root.join(&names[1]),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "MNIST file not found: looked for {} in {}, its MNIST/raw and raw",
                names.join(", "),
                root.display()
            ),
        ),
    })
}

/// Reads an IDX file of unsigned bytes with `ndim` dims (gunzipping it when
/// it starts with the gzip magic): its dims and its data.
pub(crate) fn read_idx(path: &Path, ndim: usize) -> Result<(Vec<usize>, Vec<u8>)> {
    let format = |detail: String| DataError::Format {
        path: path.to_path_buf(),
        detail,
    };
    let raw = std::fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 5);
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| format(format!("not a valid gzip stream: {e}")))?;
        out
    } else if path.extension().is_some_and(|e| e == "gz") {
        return Err(format("named .gz but not gzip data (no gzip magic number)".into()));
    } else {
        raw
    };
    let expected_magic = 0x0800 | ndim as u32;
    if bytes.len() < 4 {
        return Err(format(format!(
            "truncated: {} bytes, shorter than the 4-byte IDX magic number",
            bytes.len()
        )));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if magic != expected_magic {
        return Err(format(format!(
            "bad magic number 0x{magic:08x}: expected 0x{expected_magic:08x} (IDX file of unsigned bytes with {ndim} dimension{})",
            if ndim == 1 { "" } else { "s" }
        )));
    }
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(format(format!(
            "truncated: {} bytes, shorter than the {header}-byte IDX header",
            bytes.len()
        )));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|d| {
            let o = 4 + 4 * d;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let numel = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format(format!("dimensions {dims:?} overflow")))?;
    let data_len = bytes.len() - header;
    if data_len < numel {
        return Err(format(format!(
            "truncated: the header gives shape {dims:?} ({numel} bytes of data) but only {data_len} bytes follow it"
        )));
    }
    if data_len > numel {
        return Err(format(format!(
            "{} bytes after the data of shape {dims:?} ({numel} bytes)",
            data_len - numel
        )));
    }
    bytes.drain(..header);
    Ok((dims, bytes))
}
