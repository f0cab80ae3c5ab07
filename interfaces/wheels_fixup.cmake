# Loaded through CMAKE_PROJECT_INCLUDE by scripts/build_control_msgs.sh when building an interface
# package against the ROS 2 wheels of the package index. Their exported *_rosidl_generator_py
# targets name the include directories of the machine that built the wheels
# (/opt/python/cp3XX-cp3XX/...), which do not exist here; CMake refuses to generate with them.
# At the end of the configure step, swap those entries for this interpreter's Python and NumPy
# include directories. A regular ROS 2 install has no such paths and is left untouched.
cmake_minimum_required(VERSION 3.21)

function(_uac_fix_wheel_include_dirs)
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
  get_directory_property(_targets IMPORTED_TARGETS)
  foreach(_t IN LISTS _targets)
    get_target_property(_dirs ${_t} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _dirs)
      continue()
    endif()
    set(_fixed "")
    set(_changed FALSE)
    foreach(_d IN LISTS _dirs)
      if(NOT EXISTS "${_d}" AND _d MATCHES "numpy")
        list(APPEND _fixed ${Python3_NumPy_INCLUDE_DIRS})
        set(_changed TRUE)
      elseif(NOT EXISTS "${_d}" AND _d MATCHES "include/python3")
        list(APPEND _fixed ${Python3_INCLUDE_DIRS})
        set(_changed TRUE)
      else()
        list(APPEND _fixed "${_d}")
      endif()
    endforeach()
    if(_changed)
      list(REMOVE_DUPLICATES _fixed)
      set_target_properties(${_t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fixed}")
    endif()
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _uac_fix_wheel_include_dirs)
