// A text picture of which device holds which block of an array (JAX: jax.debug.visualize_array_sharding, which
// draws a grid of blocks, each labelled with the ids of the devices holding it, for rank 1 and 2 only; this one
// draws any rank, in plain ASCII, within a width).
//
// The picture is one or more 2-D grids of blocks. Each cell lists the devices holding that block (ascending, runs
// of three or more consecutive ids written a-b, as in "0-3,8"); column headers and row labels give the index range
// of the block along the grid's dimensions.
//   rank 0: one cell holding every device.
//   rank 1: one row of blocks along dimension 0 (as JAX draws it).
//   rank 2: rows along dimension 0, columns along dimension 1 (as JAX draws it).
//   rank > 2: the grid's two dimensions are the last two SHARDED dimensions (tiling > 1), filled up with the last
//     unsharded dimensions when fewer than two are sharded, in dimension order (rows first). One grid is drawn per
//     block index of the other sharded dimensions (row-major), labelled with their index ranges; unsharded
//     dimensions outside the grid are whole and not mentioned.
// Folding: grids wider than `max_width` show the first columns that fit and a last column "..."; more than
// `max_rows` rows or `max_grids` grids are cut, and the picture says how many were left out. A cell label longer
// than a third of the width is shortened to its first ids and the count ("0,4,8,... (64)").
//
// Example: Mesh {x:2, y:2} (ids 0..3 row-major), shape (4, 8), P('x'): devices 0 and 1 (x = 0) hold rows 0:2.
//   rows: dim 0 (2 blocks), columns: dim 1 (1 block)
//   cells: the devices holding each block
//         0:8
//       +-----+
//   0:2 | 0,1 |
//       +-----+
//   2:4 | 2,3 |
//       +-----+
#ifndef SPMDSIM_PARTITION_SHARDING_PICTURE_H_
#define SPMDSIM_PARTITION_SHARDING_PICTURE_H_

#include <string>
#include <vector>

#include "partition/named_sharding.h"

namespace spmdsim {

struct ShardingPictureOptions {
  int max_width = 80;  // characters per line (at least 20 is used)
  int max_rows = 16;   // block rows drawn per grid
  int max_grids = 8;   // grids drawn (rank > 2 with more than two sharded dimensions)
};

// Device ids ascending, runs of >= 3 consecutive ids as "a-b": {0,1,2,3,8,9} -> "0-3,8,9".
std::string DeviceIdsLabel(std::vector<int> ids);

// The picture, lines ending in '\n'. REQUIRES: layout from NamedSharding::Layout.
std::string ShardingPicture(const ShardingLayout& layout, const ShardingPictureOptions& options = {});

}  // namespace spmdsim

#endif  // SPMDSIM_PARTITION_SHARDING_PICTURE_H_
