/* all_reduce bandwidth of Open MPI called directly: the same loop as
 * crates/distributed/examples/allreduce_bw.rs (f32 SUM in place, sizes from
 * 4 KB up by 4x, about 1 GB per measurement, 5 to 200 calls, best of 3
 * after 2 warm-up calls), for bench/allreduce_mpi.sh to set beside our
 * `mpi` backend. Usage: allreduce_mpi [max_bytes] [serialized]: with
 * `serialized`, MPI is initialised with MPI_THREAD_SERIALIZED, the level
 * our backend (any program with more than one thread that calls MPI)
 * asks for; Open MPI then takes locks on each call. Rank 0 prints
 * `size_bytes time_us busbw_GB/s`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[2], "serialized") == 0) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  long max = argc > 1 ? atol(argv[1]) : 268435456L;
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (long size = 4096; size <= max; size *= 4) {
    long count = size / 4;
    float *x = malloc(size);
    if (!x) {
      fprintf(stderr, "out of memory\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < count; i++) x[i] = 1.0f;
    long iters = ((1L << 30) + size - 1) / size;
    if (iters < 5) iters = 5;
    if (iters > 200) iters = 200;
    for (int w = 0; w < 2; w++)
      MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (long i = 0; i < iters; i++)
        MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime() - t0) / iters;
      if (t < best) best = t;
    }
    if (rank == 0) {
      double busbw = size / best * 2.0 * (n - 1) / n / 1e9;
      printf("%ld %.1f %.3f\n", size, best * 1e6, busbw);
      fflush(stdout);
    }
    free(x);
  }
  MPI_Finalize();
  return 0;
}
