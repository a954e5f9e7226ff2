# Builds one header-tier probe target (tests/tiers/CMakeLists.txt) and checks the outcome:
#   -DBUILD_DIR=<build tree> -DTARGET=<probe> -DHEADER=<include spelling> -DEXPECT=public|private
# public: the build succeeds; private: it fails because the header is not found (and for no
# other reason).
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(EXPECT STREQUAL "public")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${HEADER} should be visible to ${TARGET} but the probe does not build:\n${out}")
  endif()
  message(STATUS "${TARGET}: ${HEADER} is public to it: ok")
else()
  if(rc EQUAL 0)
    message(FATAL_ERROR "${HEADER} is private but ${TARGET} includes it and builds:\n${out}")
  endif()
  string(REGEX MATCH "${HEADER}[^\n]*(No such file or directory|file not found)" missing "${out}")
  if(NOT missing)
    message(FATAL_ERROR "${TARGET} failed, but not because ${HEADER} was not found:\n${out}")
  endif()
  message(STATUS "${TARGET}: ${HEADER} is private to it: ok")
endif()
