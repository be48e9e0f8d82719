//! The layers: one file per family.

pub mod activation;
pub mod dropout;
pub mod flatten;
pub mod linear;
pub mod rnn;
