//! The layers: one file per family.

pub mod activation;
pub mod conv;
pub mod dropout;
pub mod flatten;
pub mod linear;
pub mod pool;
pub mod rnn;
