//! With the `mpi` feature: compiles `src/mpi_in_place.c`, which hands
//! Rust the MPI library's `MPI_IN_PLACE` (a macro that bindgen cannot
//! translate; Open MPI and MPICH give it different values), with the
//! compiler and include paths that rsmpi's own build finds.

fn main() {
    println!("cargo:rerun-if-changed=src/mpi_in_place.c");
    #[cfg(feature = "mpi")]
    {
        let lib = build_probe_mpi::probe().unwrap_or_else(|errs| {
            panic!("the `mpi` feature needs an MPI library (Debian: libopenmpi-dev openmpi-bin): {errs:?}")
        });
        let mut build = cc::Build::new();
        build.file("src/mpi_in_place.c");
        match lib.mpicc {
            Some(mpicc) => {
                build.compiler(mpicc);
            }
            None => {
                build.includes(&lib.include_paths);
            }
        }
        build.compile("ferrotorch_mpi_in_place");
    }
}
