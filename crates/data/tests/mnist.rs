//! MNIST: the real files in `data/mnist` (the numbers every copy of MNIST
//! has), and every kind of bad file, written small in a temp dir.

use std::io::Write;
use std::path::{Path, PathBuf};

use ferrotorch_core::{DType, Tensor};
use ferrotorch_data::datasets::MNIST;
use ferrotorch_data::transforms::{Compose, Normalize, ToTensor, Transform};
use ferrotorch_data::{DataError, DataLoader, Dataset};

fn real_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/mnist")
}

fn labels_of(ds: &MNIST, n: usize) -> Vec<i64> {
    (0..n).map(|i| ds.get(i).unwrap().1).collect()
}

#[test]
fn real_mnist_numbers() {
    let train = MNIST::new(real_root(), true).unwrap();
    let test = MNIST::new(real_root(), false).unwrap();
    assert_eq!((train.len(), test.len()), (60000, 10000));
    assert_eq!(train.images().shape(), [60000, 28, 28]);
    assert_eq!(train.images().dtype(), DType::U8);
    assert_eq!(train.labels().dtype(), DType::I64);
    assert_eq!(labels_of(&train, 10), [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]);
    assert_eq!(labels_of(&test, 10), [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]);
    let counts = train.labels().bincount(None, 10).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(counts, [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]);
    let mean = train
        .images()
        .to_dtype(DType::F64)
        .unwrap()
        .mean()
        .unwrap()
        .item::<f64>()
        .unwrap()
        / 255.0;
    assert_eq!(format!("{mean:.5}"), "0.13066");
    assert_eq!(train.labels().to_vec::<i64>().unwrap()[..10], labels_of(&train, 10)[..]);
}

#[test]
fn real_mnist_items_and_loader() {
    let norm = Normalize::new([0.1307], [0.3081]);
    let train = MNIST::new(real_root(), true)
        .unwrap()
        .with_transform(Compose::new().then(ToTensor).then(norm.clone()));
    let (img, label) = train.get(0).unwrap();
    assert_eq!(
        (img.shape(), img.dtype(), label),
        (&[1usize, 28, 28][..], DType::F32, 5)
    );
    // The whole-split fast path gives the items' bits.
    let all = train.images_float().unwrap();
    assert_eq!(all.shape(), [60000, 1, 28, 28]);
    for i in [0usize, 1, 59999] {
        let want = norm.apply(&all.select(0, i as i64).unwrap()).unwrap();
        assert_eq!(
            train.get(i).unwrap().0.to_vec::<f32>().unwrap(),
            want.to_vec::<f32>().unwrap()
        );
    }
    let raw = MNIST::new(real_root(), true).unwrap();
    let (u8img, _) = raw.get(0).unwrap();
    assert_eq!((u8img.shape(), u8img.dtype()), (&[28usize, 28][..], DType::U8));
    assert!(train.get(60000).is_err());

    // A full epoch with 2 workers: every image once, batches in order.
    let loader = DataLoader::builder(train.clone())
        .batch_size(1000)
        .num_workers(2)
        .build()
        .unwrap();
    assert_eq!(loader.len().unwrap(), 60);
    let mut seen = 0;
    let mut labels = Vec::new();
    for batch in loader.iter().unwrap() {
        let (x, y) = batch.unwrap();
        assert_eq!(x.shape(), [1000, 1, 28, 28]);
        seen += y.shape()[0];
        labels.extend(y.to_vec::<i64>().unwrap());
    }
    assert_eq!(seen, 60000);
    assert_eq!(labels, train.labels().to_vec::<i64>().unwrap());
}

/// A fresh empty directory under the system's temp dir.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrotorch-data-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = magic.to_be_bytes().to_vec();
    for d in dims {
        v.extend(d.to_be_bytes());
    }
    v.extend(data);
    v
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn images(n: u32) -> Vec<u8> {
    idx(0x803, &[n, 2, 3], &(0..n * 6).map(|i| i as u8).collect::<Vec<_>>())
}

fn labels(n: u32) -> Vec<u8> {
    idx(0x801, &[n], &(0..n).map(|i| (i % 10) as u8).collect::<Vec<_>>())
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn err_text(r: Result<MNIST, DataError>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn synthetic_files_in_every_naming() {
    // Raw files with torchvision's names, in torchvision's layout.
    let d = temp_dir("raw");
    std::fs::create_dir_all(d.join("MNIST/raw")).unwrap();
    write(&d.join("MNIST/raw"), "train-images-idx3-ubyte", &images(4));
    write(&d.join("MNIST/raw"), "train-labels-idx1-ubyte", &labels(4));
    let ds = MNIST::new(&d, true).unwrap();
    assert_eq!(ds.images().shape(), [4, 2, 3]);
    let (img, label) = ds.get(1).unwrap();
    assert_eq!((img.to_vec::<u8>().unwrap(), label), (vec![6, 7, 8, 9, 10, 11], 1));
    let t = ToTensor.apply(&img).unwrap();
    assert_eq!(t.shape(), [1, 2, 3]);
    assert_eq!(t.to_vec::<f32>().unwrap()[0], 6.0 / 255.0);

    // Dotted names, gzipped, for the test split.
    let d = temp_dir("dotted");
    write(&d, "t10k-images.idx3-ubyte.gz", &gz(&images(3)));
    write(&d, "t10k-labels.idx1-ubyte.gz", &gz(&labels(3)));
    let ds = MNIST::new(&d, false).unwrap();
    assert_eq!(ds.len(), 3);
    assert_eq!(ds.label(2), Some(2));
    assert!(MNIST::new(&d, true).is_err());
}

#[test]
fn bad_files_are_errors_naming_the_file() {
    let case = |name: &str, img: Vec<u8>, lab: Vec<u8>, img_name: &str| -> String {
        let d = temp_dir(name);
        write(&d, img_name, &img);
        write(&d, "train-labels-idx1-ubyte", &lab);
        err_text(MNIST::new(&d, true))
    };
    let img = "train-images-idx3-ubyte";

    let e = case("magic", idx(0x801, &[2, 2, 3], &[0; 12]), labels(2), img);
    assert!(e.contains(img) && e.contains("bad magic number 0x00000801"), "{e}");

    let e = case("magic-labels", images(2), idx(0x803, &[2], &[0; 2]), img);
    assert!(e.contains("train-labels-idx1-ubyte") && e.contains("bad magic"), "{e}");

    let mut short = images(2);
    short.truncate(short.len() - 1);
    let e = case("truncated", short, labels(2), img);
    assert!(
        e.contains(img) && e.contains("truncated") && e.contains("11 bytes"),
        "{e}"
    );

    let e = case("header", vec![0, 0, 8, 3, 0, 0], labels(2), img);
    assert!(e.contains("truncated") && e.contains("16-byte IDX header"), "{e}");

    let e = case("tiny", vec![0, 0], labels(2), img);
    assert!(e.contains("truncated"), "{e}");

    let mut long = images(2);
    long.push(0);
    let e = case("trailing", long, labels(2), img);
    assert!(e.contains("1 bytes after the data"), "{e}");

    let e = case("count", images(3), labels(2), img);
    assert!(
        e.contains("train-labels-idx1-ubyte") && e.contains("2 labels") && e.contains("3 images"),
        "{e}"
    );

    let mut bad_gz = gz(&images(2));
    let n = bad_gz.len();
    bad_gz.truncate(n / 2);
    let e = case("gzip", bad_gz, labels(2), "train-images-idx3-ubyte.gz");
    assert!(e.contains("train-images-idx3-ubyte.gz") && e.contains("gzip"), "{e}");

    let e = case("not-gzip", images(2), labels(2), "train-images-idx3-ubyte.gz");
    assert!(
        e.contains("train-images-idx3-ubyte.gz") && e.contains("no gzip magic"),
        "{e}"
    );

    let d = temp_dir("missing");
    write(&d, "train-images-idx3-ubyte", &images(2));
    let e = err_text(MNIST::new(&d, true));
    assert!(e.contains("train-labels-idx1-ubyte") && e.contains("not found"), "{e}");

    let e = err_text(MNIST::from_files(d.join("nope"), d.join("nope2")));
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn transform_errors() {
    let x = Tensor::zeros_dtype((2, 2), DType::U8).unwrap();
    assert!(Normalize::new([0.5], [0.5]).apply(&x).is_err()); // not float
    let f = Tensor::zeros((2, 2)).unwrap();
    assert!(Normalize::new([0.5], [0.5]).apply(&f).is_err()); // 2-d
    let img = Tensor::zeros((1, 2, 2)).unwrap();
    let e = Normalize::new([0.5], [0.0]).apply(&img).unwrap_err().to_string();
    assert!(e.contains("std evaluated to zero"), "{e}");
    assert!(ToTensor.apply(&Tensor::zeros(3).unwrap()).is_err());
    // HWC -> CHW.
    let hwc = Tensor::from_vec((0u8..12).collect::<Vec<_>>(), (2, 2, 3)).unwrap();
    let chw = ToTensor.apply(&hwc).unwrap();
    assert_eq!(chw.shape(), [3, 2, 2]);
    assert_eq!(
        chw.select(0, 1)
            .unwrap()
            .mul(255.0)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.round())
            .collect::<Vec<_>>(),
        [1.0, 4.0, 7.0, 10.0]
    );
}
