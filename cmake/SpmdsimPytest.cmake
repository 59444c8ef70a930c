# Python tests under the test suite's virtual environment (scripts/python-env.sh; docs/testing.md, "Python tests").
#
# SPMDSIM_TEST_PYTHON: the interpreter that runs every pytest file: build/venv/bin/python, Debian's Python 3 with
# the pinned peers (jax, jaxlib, flax, optax, eformer, fjformer, numpy, pytest) of python/requirements-test.txt.
# The ctest `python.env` makes or checks that environment (a no-op when it is up to date) and is a fixture of every
# test added here, so `ctest` alone works on a fresh tree; without the package index it fails in one line, and the
# tests that need it are not run (ctest lists them as failed, never as passed).
#
# spmdsim_add_pytest(NAME FILE [TIMEOUT seconds] [LABELS ...] [ENVIRONMENT VAR=value ...])
#   adds the ctest NAME running `SPMDSIM_TEST_PYTHON -m pytest -q FILE` in FILE's folder, with the build tree's
#   `spmdsim` package first on PYTHONPATH (when the module is built), SPMDSIM_CLI / SPMDSIM_SOURCE_DIR set and
#   JAX_PLATFORMS=cpu: the environment holds libtpu and the CUDA plugin (python/requirements-target.txt) to compile
#   for TPUs and GPUs in a subprocess (docs/targets.md); JAX in the test itself runs on the CPU only, as it did
#   before they were installed, instead of trying (and logging) a TPU and a CUDA runtime this machine lacks.
#   Example (another folder's CMakeLists.txt):
#     spmdsim_add_pytest(hlo.import_jax ${CMAKE_CURRENT_SOURCE_DIR}/test_import_jax.py TIMEOUT 600 LABELS hlo)
#   pytest exits 5 when it collects nothing, which ctest counts as a failure: a file whose tests vanish fails.
set(SPMDSIM_TEST_VENV "${PROJECT_SOURCE_DIR}/build/venv" CACHE PATH
    "The Python test environment that scripts/python-env.sh makes")
set(SPMDSIM_TEST_PYTHON "${SPMDSIM_TEST_VENV}/bin/python" CACHE FILEPATH
    "The interpreter of the Python tests (spmdsim_add_pytest)")

function(spmdsim_add_python_env_fixture)
  get_property(added GLOBAL PROPERTY SPMDSIM_PYTHON_ENV_TEST_ADDED)  # if(TEST) sees only this folder's tests
  if(added)
    return()
  endif()
  set_property(GLOBAL PROPERTY SPMDSIM_PYTHON_ENV_TEST_ADDED ON)
  add_test(NAME python.env COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/python-env.sh ${SPMDSIM_TEST_VENV})
  set_tests_properties(python.env PROPERTIES FIXTURES_SETUP python_env TIMEOUT 900 LABELS "python")
endfunction()

function(spmdsim_add_pytest name file)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;ENVIRONMENT" ${ARGN})
  spmdsim_add_python_env_fixture()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  get_filename_component(dir ${file} DIRECTORY)
  set(env "PYTHONDONTWRITEBYTECODE=1" "SPMDSIM_SOURCE_DIR=${PROJECT_SOURCE_DIR}" "JAX_PLATFORMS=cpu")
  if(TARGET spmdsim_python)
    list(APPEND env "PYTHONPATH=${PROJECT_BINARY_DIR}/python")
  endif()
  if(TARGET spmdsim)
    list(APPEND env "SPMDSIM_CLI=$<TARGET_FILE:spmdsim>")
  endif()
  add_test(NAME ${name}
           COMMAND ${SPMDSIM_TEST_PYTHON} -m pytest -q -p no:cacheprovider --rootdir=${dir} ${file}
           WORKING_DIRECTORY ${dir})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "python;${ARG_LABELS}"
                       FIXTURES_REQUIRED python_env ENVIRONMENT "${env};${ARG_ENVIRONMENT}")
endfunction()
