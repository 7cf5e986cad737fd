# Runs the sample trainer in the ways ctest checks (cmake -P).
#   -DMODE=help|huge_batch|piped_error|host_memory_line|small_batch|nonfinite_loss|auto_workers|ranks
#   -DTRAIN=<train binary> [-DMPIEXEC=<mpirun> -DRANKS=N -DTOLERANCE=<pp>]
# ranks: one process at batch 2B against RANKS processes at batch B each
# (the same global batch, the same samples per step: DistributedSampler
# shares one shuffle), both with --check_coverage; the held-out accuracies
# must agree within TOLERANCE percentage points.
cmake_minimum_required(VERSION 3.24)
set(common --device=cpu --synthetic_records=${RECORDS} --epochs=${EPOCHS} --hidden=${HIDDEN})

function(run_train out_var rc_var)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE out
                  RESULT_VARIABLE rc)
  message("$ ${ARGN}\n${out}")
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "help")
  run_train(out rc ${TRAIN} --help)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "--batch_size")
    message(FATAL_ERROR "train --help: exit ${rc}, want 0 and the flags listed")
  endif()
elseif(MODE STREQUAL "huge_batch")
  run_train(out rc ${TRAIN} ${common} --batch_size=1000000000)
  if(NOT rc EQUAL 1 OR NOT out MATCHES "--batch_size=1000000000 is larger than")
    message(FATAL_ERROR "train --batch_size=1000000000: exit ${rc}, want 1 "
                        "and an error naming the flag (not bad_alloc)")
  endif()
elseif(MODE STREQUAL "auto_workers")
  # --workers/--prefetch=auto: trains, and each epoch says where the tuner
  # stands; a count that is neither >= 1 nor auto is refused naming it.
  run_train(out rc ${TRAIN} ${common} --workers=auto --prefetch=auto)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "loader: auto workers, prefetch auto"
     OR NOT out MATCHES "loader auto: [0-9]+ of [0-9]+ workers, prefetch [0-9]+ of [0-9]+")
    message(FATAL_ERROR "train --workers=auto --prefetch=auto: exit ${rc}, "
                        "want 0 and the tuner's line each epoch")
  endif()
  run_train(out rc ${TRAIN} ${common} --workers=some)
  if(NOT rc EQUAL 1 OR NOT out MATCHES "--workers=some; must be a whole number >= 1 or auto")
    message(FATAL_ERROR "train --workers=some: exit ${rc}, want 1 and an error naming it")
  endif()
elseif(MODE STREQUAL "piped_error")
  # Both pipes into one variable: merged in the order written.
  run_train(out rc ${TRAIN} ${common} --batch_size=999999)
  string(FIND "${out}" "train.pwr" context_at)
  string(FIND "${out}" "train: error" error_at)
  if(NOT rc EQUAL 1 OR context_at LESS 0 OR error_at LESS context_at)
    message(FATAL_ERROR "the error line came before the context lines "
                        "(context at ${context_at}, error at ${error_at})")
  endif()
elseif(MODE STREQUAL "host_memory_line")
  run_train(out rc ${TRAIN} ${common} --batch_size=50)
  if(NOT rc EQUAL 0 OR out MATCHES "MiB pinned" OR out MATCHES "on the device"
     OR NOT out MATCHES "host slots \\(host backend")
    message(FATAL_ERROR "the host run must not print pinned/device sizes")
  endif()
  if(NOT out MATCHES "NUMA placement: ")
    message(FATAL_ERROR "the trainer must say what NUMA placement did")
  endif()
elseif(MODE STREQUAL "small_batch")
  # Issue 18 item 17: --lr=0.05 at batch 7 grew the loss to 1e3 in an epoch
  # and to NaN after; the rate scaled to the batch must train: every epoch's
# loss finite and below chance, the last below 2.0.
  run_train(out rc ${TRAIN} ${common} --batch_size=7)
  string(REGEX MATCHALL "train loss [^ ]+" losses "${out}")
  list(LENGTH losses epochs_seen)
  if(NOT rc EQUAL 0 OR NOT epochs_seen EQUAL EPOCHS)
    message(FATAL_ERROR "train --batch_size=7: exit ${rc}, ${epochs_seen} epoch lines; want 0 and ${EPOCHS}")
  endif()
  foreach(l IN LISTS losses)
    string(REGEX REPLACE "train loss " "" v "${l}")
    if(NOT v MATCHES "^[0-9]+\\.[0-9]+$" OR v GREATER_EQUAL 2.3)
      message(FATAL_ERROR "train --batch_size=7: ${l}; want a finite loss below ln(10) = 2.30")
    endif()
  endforeach()
  if(v GREATER_EQUAL 2.0)
    message(FATAL_ERROR "train --batch_size=7: the last epoch's loss is ${v}; want below 2.0")
  endif()
elseif(MODE STREQUAL "nonfinite_loss")
  # A diverged run stops with an error naming the epoch and the step, not a
  # "train loss -nan" epoch line.
  run_train(out rc ${TRAIN} ${common} --batch_size=50 --lr=10000)
  if(rc EQUAL 0 OR NOT out MATCHES "train: error: ABORTED: epoch 1, step [0-9]+ of the epoch \\(step [0-9]+ of the job\\): the batch's training loss is not finite"
     OR out MATCHES "train loss")
    message(FATAL_ERROR "train --lr=10000: exit ${rc}; want non-zero, an error naming epoch and step, and no epoch line")
  endif()
elseif(MODE STREQUAL "ranks")
  math(EXPR global_batch "${BATCH} * ${RANKS}")
  run_train(one rc ${TRAIN} ${common} --batch_size=${global_batch} --check_coverage)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "one rank failed (exit ${rc})")
  endif()
  run_train(many rc ${MPIEXEC} --oversubscribe --allow-run-as-root -np ${RANKS}
            ${TRAIN} ${common} --batch_size=${BATCH} --check_coverage)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${RANKS} ranks failed (exit ${rc})")
  endif()
  string(REGEX MATCHALL "coverage: epoch [0-9]+: the ${RANKS} rank\\(s\\) together read each"
         covered "${many}")
  list(LENGTH covered epochs_covered)
  if(NOT epochs_covered EQUAL EPOCHS)
    message(FATAL_ERROR "${epochs_covered} of ${EPOCHS} epochs proven covered exactly once")
  endif()
  # Every epoch says each rank's share of time waited for data (issue 30).
  set(waited_pattern "per rank waited for data:")
  foreach(r RANGE 1 ${RANKS})
    string(APPEND waited_pattern " [0-9]+\\.[0-9]%")
  endforeach()
  string(REGEX MATCHALL "${waited_pattern}\n" waited "${many}")
  list(LENGTH waited epochs_waited)
  if(NOT epochs_waited EQUAL EPOCHS)
    message(FATAL_ERROR "${epochs_waited} of ${EPOCHS} epochs said each of the ${RANKS} ranks' waited for data")
  endif()
  # ... and which rank waits longest, gathered as RankWait records (issue 33).
  string(REGEX MATCHALL "\n  (slowest rank [0-9]+ of ${RANKS}: |no rank waits for data: the slowest, rank [0-9]+ of ${RANKS}, )Next\\(\\) waits for data p50 "
         slowest "${many}")
  list(LENGTH slowest epochs_slowest)
  if(NOT epochs_slowest EQUAL EPOCHS)
    message(FATAL_ERROR "${epochs_slowest} of ${EPOCHS} epochs named the slowest of the ${RANKS} ranks")
  endif()
  string(REGEX MATCH "final held-out accuracy ([0-9.]+)%" _ "${one}")
  set(a1 "${CMAKE_MATCH_1}")
  string(REGEX MATCH "final held-out accuracy ([0-9.]+)% .* x ${RANKS} ranks" _ "${many}")
  set(an "${CMAKE_MATCH_1}")
  if(a1 STREQUAL "" OR an STREQUAL "")
    message(FATAL_ERROR "no final accuracy line (one rank '${a1}', ${RANKS} ranks '${an}')")
  endif()
  # No floating point in CMake: compare in hundredths of a percent.
  string(REPLACE "." "" h1 "${a1}")
  string(REPLACE "." "" hn "${an}")
  math(EXPR diff "${h1} - ${hn}")
  if(diff LESS 0)
    math(EXPR diff "-${diff}")
  endif()
  math(EXPR tolerance "${TOLERANCE} * 100")
  message("held-out accuracy: 1 rank ${a1}%, ${RANKS} ranks ${an}% (|diff| ${diff}/100 pp, tolerance ${TOLERANCE} pp)")
  if(diff GREATER tolerance)
    message(FATAL_ERROR "accuracies differ by more than ${TOLERANCE} pp")
  endif()
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
