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

// The dimensions the picture draws: rows (row_dim, -1 for rank < 2) and columns (col_dim, -1 for rank 0) of each
// grid, and one grid per block of the other sharded dimensions (`leading`).
struct GridDims {
  int row_dim = -1, col_dim = -1;
  std::vector<int> leading;
  int64_t num_rows = 1, num_cols = 1, num_grids = 1;
};

// The two last sharded dimensions (or, when fewer are sharded, the last unsharded ones) are the grid's.
GridDims ChooseGridDims(const ShardingLayout& layout) {
  const int rank = static_cast<int>(layout.global_shape.size());
  GridDims g;
  if (rank == 1) {
    g.col_dim = 0;
  } else if (rank >= 2) {
    std::vector<int> grid;
    for (int d = rank - 1; d >= 0 && grid.size() < 2; --d) {
      if (layout.tiling[d] > 1) grid.push_back(d);
    }
    for (int d = rank - 1; d >= 0 && grid.size() < 2; --d) {
      if (layout.tiling[d] == 1 && std::find(grid.begin(), grid.end(), d) == grid.end()) grid.push_back(d);
    }
    std::sort(grid.begin(), grid.end());
    g.row_dim = grid[0];
    g.col_dim = grid[1];
    for (int d = 0; d < rank; ++d) {
      if (layout.tiling[d] > 1 && d != g.row_dim && d != g.col_dim) g.leading.push_back(d);
    }
  }
  g.num_rows = g.row_dim >= 0 ? layout.tiling[g.row_dim] : 1;
  g.num_cols = g.col_dim >= 0 ? layout.tiling[g.col_dim] : 1;
  for (int d : g.leading) g.num_grids *= layout.tiling[d];
  return g;
}

// The picture's first lines: what rows, columns and grids stand for.
std::string Legend(const GridDims& g, int rank) {
  std::string out;
  if (rank == 0) {
    out += "scalar: one block\n";
  } else if (rank == 1) {
    out += fmt::format("columns: dim 0 ({} block{})\n", g.num_cols, g.num_cols == 1 ? "" : "s");
  } else {
    out += fmt::format("rows: dim {} ({} block{}), columns: dim {} ({} block{})", g.row_dim, g.num_rows,
                       g.num_rows == 1 ? "" : "s", g.col_dim, g.num_cols, g.num_cols == 1 ? "" : "s");
    if (!g.leading.empty()) {
      std::vector<std::string> dims;
      for (int d : g.leading) dims.push_back(std::to_string(d));
      out += fmt::format("; one grid per block of dim{} {} ({} grids)", g.leading.size() == 1 ? "" : "s",
                         fmt::join(dims, ", "), g.num_grids);
    }
    out += "\n";
  }
  return out + "cells: the devices holding each block\n";
}

// The shard_id of block (i, j) of grid `grid`; `stride`: row-major strides of the block grid.
int64_t ShardOf(const ShardingLayout& layout, const GridDims& g, const std::vector<int64_t>& stride, int64_t grid,
                int64_t i, int64_t j) {
  int64_t id = 0;
  for (auto it = g.leading.rbegin(); it != g.leading.rend(); ++it) {
    id += (grid % layout.tiling[*it]) * stride[*it];
    grid /= layout.tiling[*it];
  }
  if (g.row_dim >= 0) id += i * stride[g.row_dim];
  if (g.col_dim >= 0) id += j * stride[g.col_dim];
  return id;
}

// What every grid drawn shares: the labels, the cells' width (over every cell that will be drawn, and the column
// headers), how many rows, columns and grids are drawn, and the cells themselves ([grid][row][column]).
struct GridText {
  std::vector<std::string> col_headers, row_labels;
  size_t row_label_width = 0;
  size_t prefix = 0;      // row labels + " "
  size_t cell_width = 0;  // one space either side included
  int64_t rows_drawn = 0, cols_drawn = 0, grids_drawn = 0;
  bool folded_cols = false;
  std::vector<std::vector<std::vector<std::string>>> cells;
};

GridText LayOutGrids(const ShardingLayout& layout, const GridDims& g, const ShardingPictureOptions& options) {
  const size_t max_width = static_cast<size_t>(std::max(options.max_width, 20));
  GridText t;
  t.rows_drawn = std::min<int64_t>(g.num_rows, std::max(options.max_rows, 1));
  t.grids_drawn = std::min<int64_t>(g.num_grids, std::max(options.max_grids, 1));
  const size_t label_cap = std::max<size_t>(max_width / 3, 8);
  t.col_headers.resize(g.num_cols);
  t.row_labels.resize(g.num_rows);
  for (int64_t j = 0; j < g.num_cols; ++j) {
    t.col_headers[j] = g.col_dim >= 0 ? Range(j, layout.shard_shape[g.col_dim]) : "";
  }
  for (int64_t i = 0; i < g.num_rows; ++i) {
    t.row_labels[i] = g.row_dim >= 0 ? Range(i, layout.shard_shape[g.row_dim]) : "";
    t.row_label_width = std::max(t.row_label_width, t.row_labels[i].size());
  }
  const std::vector<int64_t> stride = RowMajorStrides(layout.tiling);
  t.cells.resize(t.grids_drawn);
  size_t cell_width = 3;  // fits "..."
  for (int64_t grid = 0; grid < t.grids_drawn; ++grid) {
    t.cells[grid].assign(t.rows_drawn, std::vector<std::string>(g.num_cols));
    for (int64_t i = 0; i < t.rows_drawn; ++i) {
      for (int64_t j = 0; j < g.num_cols; ++j) {
        t.cells[grid][i][j] = CellLabel(layout.DevicesOfShard(ShardOf(layout, g, stride, grid, i, j)), label_cap);
        cell_width = std::max(cell_width, t.cells[grid][i][j].size());
      }
    }
  }
  for (const auto& h : t.col_headers) cell_width = std::max(cell_width, h.size());
  t.cell_width = cell_width + 2;  // one space either side

  // How many columns fit: prefix (row labels + " "), then "+" and cell_width+1 per column.
  t.prefix = g.row_dim >= 0 ? t.row_label_width + 1 : 0;
  t.cols_drawn = g.num_cols;
  if (t.prefix + 1 + g.num_cols * (t.cell_width + 1) > max_width) {
    t.folded_cols = true;
    const size_t room = max_width > t.prefix + 1 + 6 ? max_width - t.prefix - 1 - 6 : 0;  // 6 = "| ... |"
    t.cols_drawn = std::max<int64_t>(1, static_cast<int64_t>(room / (t.cell_width + 1)));
    t.cols_drawn = std::min(t.cols_drawn, g.num_cols);
  }
  return t;
}

// A horizontal rule under the column headers and each row.
std::string Rule(const GridText& t) {
  std::string line(t.prefix, ' ');
  line += '+';
  for (int64_t j = 0; j < t.cols_drawn; ++j) line += std::string(t.cell_width, '-') + '+';
  if (t.folded_cols) line += "-----+";
  line += '\n';
  return line;
}

// Grid `grid`: its caption (which block of the leading dimensions), column headers and rows.
void DrawGrid(const ShardingLayout& layout, const GridDims& g, const GridText& t, int64_t grid, std::string& out) {
  if (!g.leading.empty()) {
    std::vector<std::string> parts;
    int64_t rest = grid;
    std::vector<int64_t> coord(g.leading.size());
    for (size_t k = g.leading.size(); k-- > 0;) {
      coord[k] = rest % layout.tiling[g.leading[k]];
      rest /= layout.tiling[g.leading[k]];
    }
    for (size_t k = 0; k < g.leading.size(); ++k) {
      parts.push_back(fmt::format("dim {} = {}", g.leading[k], Range(coord[k], layout.shard_shape[g.leading[k]])));
    }
    out += fmt::format("grid {} of {}: {}\n", grid + 1, g.num_grids, fmt::join(parts, ", "));
  }
  if (g.col_dim >= 0) {
    std::string header(t.prefix + 1, ' ');
    for (int64_t j = 0; j < t.cols_drawn; ++j) {  // appended piecewise: GCC 12 -O3 warns (-Wrestrict) on " " + str
      header += ' ';
      header += Pad(t.col_headers[j], t.cell_width - 1);
      header += ' ';
    }
    while (!header.empty() && header.back() == ' ') header.pop_back();
    out += header;
    out += '\n';
  }
  out += Rule(t);
  for (int64_t i = 0; i < t.rows_drawn; ++i) {
    std::string line;
    if (g.row_dim >= 0) {
      line += Pad(t.row_labels[i], t.row_label_width, /*right_align=*/true);
      line += ' ';
    }
    line += '|';
    for (int64_t j = 0; j < t.cols_drawn; ++j) {
      line += ' ';
      line += Pad(t.cells[grid][i][j], t.cell_width - 1);
      line += '|';
    }
    if (t.folded_cols) line += " ... |";
    out += line;
    out += '\n';
    out += Rule(t);
  }
  if (t.rows_drawn < g.num_rows) {
    out += fmt::format("... {} more row{} of blocks (of {})\n", g.num_rows - t.rows_drawn,
                       g.num_rows - t.rows_drawn == 1 ? "" : "s", g.num_rows);
  }
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
  const GridDims g = ChooseGridDims(layout);
  std::string out = Legend(g, rank);
  const GridText t = LayOutGrids(layout, g, options);
  for (int64_t grid = 0; grid < t.grids_drawn; ++grid) DrawGrid(layout, g, t, grid, out);
  if (t.folded_cols) {
    out += fmt::format("... {} more column{} of blocks (of {}) do not fit in {} characters\n",
                       g.num_cols - t.cols_drawn, g.num_cols - t.cols_drawn == 1 ? "" : "s", g.num_cols, max_width);
  }
  if (t.grids_drawn < g.num_grids) {
    out += fmt::format("... {} more grid{} (of {})\n", g.num_grids - t.grids_drawn,
                       g.num_grids - t.grids_drawn == 1 ? "" : "s", g.num_grids);
  }
  return out;
}

}  // namespace spmdsim
