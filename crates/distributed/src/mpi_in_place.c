/* MPI_IN_PLACE of the MPI library ferrotorch links (the `mpi` feature):
 * a macro, so Rust asks this function for its value. */
#include <mpi.h>

void *ferrotorch_mpi_in_place(void) { return MPI_IN_PLACE; }
