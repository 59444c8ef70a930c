#include "partition/sharding_picture.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/shape.h"

namespace spmdsim {
namespace {

std::string Range(int64_t block, int64_t block_size) {
  return fmt::format("{}:{}", block * block_size, (block + 1) * block_size);
}

// Shortens a device list to its first ids and the count when it is longer than `cap` characters.
std::string CellLabel(const std::vector<int>& ids, size_t cap) {
  std::string full = DeviceIdsLabel(ids);
  if (full.size() <= cap) return full;
  const std::string tail = fmt::format(",... ({})", ids.size());
  std::string label;
  for (int id : ids) {
    std::string next = label;
    if (!next.empty()) next += ',';
    next += std::to_string(id);
    if (next.size() + tail.size() > cap && !label.empty()) break;
    label = std::move(next);
  }
  return label + tail;
}

std::string Pad(const std::string& text, size_t width, bool right_align = false) {
  if (text.size() >= width) return text;
  return right_align ? std::string(width - text.size(), ' ') + text : text + std::string(width - text.size(), ' ');
}

}  // namespace

std::string DeviceIdsLabel(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  std::string out;
  size_t i = 0;
  while (i < ids.size()) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ids[i], ids[j]);
    } else {
      out += std::to_string(ids[i]);
      if (j > i) out += fmt::format(",{}", ids[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string ShardingPicture(const ShardingLayout& layout, const ShardingPictureOptions& options) {
  const int rank = static_cast<int>(layout.global_shape.size());
  SPMDSIM_CHECK(static_cast<int>(layout.tiling.size()) == rank, "layout tiling has {} entries for rank {}",
                layout.tiling.size(), rank);
  const size_t max_width = static_cast<size_t>(std::max(options.max_width, 20));
  const int max_rows = std::max(options.max_rows, 1);
  const int max_grids = std::max(options.max_grids, 1);

  // The grid's dimensions: row_dim (-1 for rank < 2) and col_dim (-1 for rank 0); `leading`: other sharded dims.
  int row_dim = -1, col_dim = -1;
  std::vector<int> leading;
  if (rank == 1) {
    col_dim = 0;
  } else if (rank >= 2) {
    std::vector<int> grid;
    for (int d = rank - 1; d >= 0 && grid.size() < 2; --d) {
      if (layout.tiling[d] > 1) grid.push_back(d);
    }
    for (int d = rank - 1; d >= 0 && grid.size() < 2; --d) {
      if (layout.tiling[d] == 1 && std::find(grid.begin(), grid.end(), d) == grid.end()) grid.push_back(d);
    }
    std::sort(grid.begin(), grid.end());
    row_dim = grid[0];
    col_dim = grid[1];
    for (int d = 0; d < rank; ++d) {
      if (layout.tiling[d] > 1 && d != row_dim && d != col_dim) leading.push_back(d);
    }
  }
  const int64_t num_rows = row_dim >= 0 ? layout.tiling[row_dim] : 1;
  const int64_t num_cols = col_dim >= 0 ? layout.tiling[col_dim] : 1;
  int64_t num_grids = 1;
  for (int d : leading) num_grids *= layout.tiling[d];

  // Row-major strides of the block grid, to turn block coordinates into a shard_id.
  const std::vector<int64_t> stride = RowMajorStrides(layout.tiling);

  std::string out;
  if (rank == 0) {
    out += "scalar: one block\n";
  } else if (rank == 1) {
    out += fmt::format("columns: dim 0 ({} block{})\n", num_cols, num_cols == 1 ? "" : "s");
  } else {
    out += fmt::format("rows: dim {} ({} block{}), columns: dim {} ({} block{})", row_dim, num_rows,
                       num_rows == 1 ? "" : "s", col_dim, num_cols, num_cols == 1 ? "" : "s");
    if (!leading.empty()) {
      std::vector<std::string> dims;
      for (int d : leading) dims.push_back(std::to_string(d));
      out += fmt::format("; one grid per block of dim{} {} ({} grids)", leading.size() == 1 ? "" : "s",
                         fmt::join(dims, ", "), num_grids);
    }
    out += "\n";
  }
  out += "cells: the devices holding each block\n";

  // Labels, headers and widths are the same for every grid except the cell labels; compute the cell width over
  // every cell that will be drawn.
  const int64_t rows_drawn = std::min<int64_t>(num_rows, max_rows);
  const int64_t grids_drawn = std::min<int64_t>(num_grids, max_grids);
  const size_t label_cap = std::max<size_t>(max_width / 3, 8);
  std::vector<std::string> col_headers(num_cols), row_labels(num_rows);
  for (int64_t j = 0; j < num_cols; ++j) {
    col_headers[j] = col_dim >= 0 ? Range(j, layout.shard_shape[col_dim]) : "";
  }
  size_t row_label_width = 0;
  for (int64_t i = 0; i < num_rows; ++i) {
    row_labels[i] = row_dim >= 0 ? Range(i, layout.shard_shape[row_dim]) : "";
    row_label_width = std::max(row_label_width, row_labels[i].size());
  }

  auto shard_of = [&](int64_t grid, int64_t i, int64_t j) {
    int64_t id = 0;
    for (auto it = leading.rbegin(); it != leading.rend(); ++it) {
      id += (grid % layout.tiling[*it]) * stride[*it];
      grid /= layout.tiling[*it];
    }
    if (row_dim >= 0) id += i * stride[row_dim];
    if (col_dim >= 0) id += j * stride[col_dim];
    return id;
  };

  std::vector<std::vector<std::vector<std::string>>> cells(grids_drawn);
  size_t cell_width = 3;  // fits "..."
  for (int64_t g = 0; g < grids_drawn; ++g) {
    cells[g].assign(rows_drawn, std::vector<std::string>(num_cols));
    for (int64_t i = 0; i < rows_drawn; ++i) {
      for (int64_t j = 0; j < num_cols; ++j) {
        cells[g][i][j] = CellLabel(layout.DevicesOfShard(shard_of(g, i, j)), label_cap);
        cell_width = std::max(cell_width, cells[g][i][j].size());
      }
    }
  }
  for (const auto& h : col_headers) cell_width = std::max(cell_width, h.size());
  cell_width += 2;  // one space either side

  // How many columns fit: prefix (row labels + " "), then "+" and cell_width+1 per column.
  const size_t prefix = row_dim >= 0 ? row_label_width + 1 : 0;
  int64_t cols_drawn = num_cols;
  bool folded_cols = false;
  if (prefix + 1 + num_cols * (cell_width + 1) > max_width) {
    folded_cols = true;
    const size_t room = max_width > prefix + 1 + 6 ? max_width - prefix - 1 - 6 : 0;  // 6 = "| ... |"
    cols_drawn = std::max<int64_t>(1, static_cast<int64_t>(room / (cell_width + 1)));
    cols_drawn = std::min(cols_drawn, num_cols);
  }

  auto rule = [&] {
    std::string line(prefix, ' ');
    line += '+';
    for (int64_t j = 0; j < cols_drawn; ++j) line += std::string(cell_width, '-') + '+';
    if (folded_cols) line += "-----+";
    line += '\n';
    return line;
  };

  for (int64_t g = 0; g < grids_drawn; ++g) {
    if (!leading.empty()) {
      std::vector<std::string> parts;
      int64_t rest = g;
      std::vector<int64_t> coord(leading.size());
      for (size_t k = leading.size(); k-- > 0;) {
        coord[k] = rest % layout.tiling[leading[k]];
        rest /= layout.tiling[leading[k]];
      }
      for (size_t k = 0; k < leading.size(); ++k) {
        parts.push_back(fmt::format("dim {} = {}", leading[k], Range(coord[k], layout.shard_shape[leading[k]])));
      }
      out += fmt::format("grid {} of {}: {}\n", g + 1, num_grids, fmt::join(parts, ", "));
    }
    if (col_dim >= 0) {
      std::string header(prefix + 1, ' ');
      for (int64_t j = 0; j < cols_drawn; ++j) {  // appended piecewise: GCC 12 -O3 warns (-Wrestrict) on " " + str
        header += ' ';
        header += Pad(col_headers[j], cell_width - 1);
        header += ' ';
      }
      while (!header.empty() && header.back() == ' ') header.pop_back();
      out += header;
      out += '\n';
    }
    out += rule();
    for (int64_t i = 0; i < rows_drawn; ++i) {
      std::string line;
      if (row_dim >= 0) {
        line += Pad(row_labels[i], row_label_width, /*right_align=*/true);
        line += ' ';
      }
      line += '|';
      for (int64_t j = 0; j < cols_drawn; ++j) {
        line += ' ';
        line += Pad(cells[g][i][j], cell_width - 1);
        line += '|';
      }
      if (folded_cols) line += " ... |";
      out += line;
      out += '\n';
      out += rule();
    }
    if (rows_drawn < num_rows) {
      out += fmt::format("... {} more row{} of blocks (of {})\n", num_rows - rows_drawn,
                         num_rows - rows_drawn == 1 ? "" : "s", num_rows);
    }
  }
  if (folded_cols) {
    out += fmt::format("... {} more column{} of blocks (of {}) do not fit in {} characters\n",
                       num_cols - cols_drawn, num_cols - cols_drawn == 1 ? "" : "s", num_cols, max_width);
  }
  if (grids_drawn < num_grids) {
    out += fmt::format("... {} more grid{} (of {})\n", num_grids - grids_drawn, num_grids - grids_drawn == 1 ? "" : "s",
                       num_grids);
  }
  return out;
}

}  // namespace spmdsim
