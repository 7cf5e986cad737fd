# Fails unless README.md holds SOURCE verbatim.
# cmake -DREADME=... -DSOURCE=... -P check_readme_copy.cmake
file(READ "${README}" readme)
file(READ "${SOURCE}" source)
string(FIND "${readme}" "${source}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not hold ${SOURCE} verbatim: copy the file into the README's code block")
endif()
message(STATUS "README.md holds ${SOURCE} verbatim")
