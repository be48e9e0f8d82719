//! Ready-made datasets (torchvision's `datasets`): [`MNIST`], read from
//! local files (nothing is downloaded).

pub mod mnist;

pub use mnist::MNIST;
