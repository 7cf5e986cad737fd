# Fails unless README.md holds embed_example.cc verbatim.
# cmake -DREADME=... -DSOURCE=... -P check_readme.cmake
file(READ "${README}" readme)
file(READ "${SOURCE}" source)
string(FIND "${readme}" "${source}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not hold ${SOURCE} verbatim: copy the file into the README's 'Embedding pinwheel in your trainer' block")
endif()
message(STATUS "README.md holds ${SOURCE} verbatim")
