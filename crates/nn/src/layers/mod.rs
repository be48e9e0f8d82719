//! The layers: one file per family.

pub mod activation;
pub mod conv;
pub mod dropout;
pub mod embedding;
pub mod flatten;
pub mod linear;
pub mod loss;
pub mod norm;
pub mod pool;
pub mod rnn;
pub mod transformer;
