# bench.alltoallv.blocks: `dct-dlrm --dump-lookups` writes the demo's real embedding lookups and
# `dct-bench alltoallv --blocks` reads them back, so that neither side of the format can change
# alone. Then the bench's validation of the file: wrong rank count, truncated, not a lookups
# file, header fields out of range; each a usage error (exit 2) naming the problem.
#   cmake -DMPIEXEC=... -DDEMO=... -DBENCH=... -DDIR=... -DCHECK=check_json.cmake -P blocks_test.cmake
set(file ${DIR}/blocks_test.lookups)
file(REMOVE ${file})
# 2 ranks: d = 8 tables x 16 columns = 128; 2 steps of 8 rows per block: B = 2 x 2 x 8 = 32.
execute_process(COMMAND ${MPIEXEC} -n 2 ${DEMO} --modes dense --epochs 1 --train-limit 512
                        --test-limit 100 --batch 8 --quiet --dump-lookups ${file} --dump-steps 2
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT code EQUAL 0)
  message(FATAL_ERROR "dct-dlrm --dump-lookups exited with ${code}")
endif()
file(SIZE ${file} size)
math(EXPR expected "40 + 2 * 2 * 2 * 8 * 128 * 4")
if(NOT size EQUAL expected)
  message(FATAL_ERROR "the dump has ${size} bytes, expected ${expected}")
endif()

# check(<rows> <equal> <positive> <less> <bench args...>): one bench run, its JSON checked.
function(check rows equal positive less)
  list(JOIN ARGN "|" args)
  execute_process(COMMAND ${CMAKE_COMMAND}
                          "-DCOMMAND=${MPIEXEC}|-n|2|${BENCH}|alltoallv|--blocks|${file}|${args}"
                          -DROWS=${rows} "-DEQUAL=${equal}" "-DPOSITIVE=${positive}"
                          "-DLESS=${less}" -P ${CHECK}
                  RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "the bench's JSON check failed")
  endif()
endfunction()
set(quick --iters 2 --warmup 1 --codec-seconds 0.01 --json)
# Both compressors on the blocks and on N(0,1) rows of their shape (the default --data with
# --blocks): 2 data x (1 top-k + 2 lossless stages) rows; the shape is the file's.
check(6 "ranks=2|rows=32|d=128|type=float" "fwd_x|both_x|enc_GBs|dec_GBs|codec_x"
      "max_err<=err_limit" --compressor topk,error_bounded --keep 0.25 --error-bound 0.05
      --lossless zstd,lz4 ${quick})
# The blocks alone: the file's 16 table columns, every error within its table's bound, and the
# values are the lookups (init U(+-1/64): a range near 0.03, so 0.05 of it is below 0.01; N(0,1)
# rows would give about 0.3).
check(1 "data=blocks|table_columns=16|compressor=error_bounded|lossless=zstd"
      "max_err|err_limit|fwd_x|codec_x" "max_err<=err_limit|err_limit<0.01"
      --data blocks --compressor error_bounded --error-bound 0.05 --lossless zstd ${quick})

# expect_refusal(<regex> <ranks> <file> [args]): the bench exits 2 with a message matching <regex>.
function(expect_refusal regex ranks path)
  execute_process(COMMAND ${MPIEXEC} -n ${ranks} ${BENCH} alltoallv --blocks ${path} ${quick} ${ARGN}
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT code EQUAL 2 OR NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "expected exit code 2 and '${regex}', got ${code}")
  endif()
endfunction()
expect_refusal("dumped from 2 ranks, run with 3" 3 ${file})
expect_refusal("--rows excludes --blocks" 2 ${file} --rows 64)
expect_refusal("no-such-file: cannot open" 2 ${DIR}/no-such-file)
expect_refusal("not a dct lookups file" 2 ${CHECK})
execute_process(COMMAND head -c 1000 ${file} OUTPUT_FILE ${file}.short)
expect_refusal("1000 bytes, but its header implies ${expected}" 2 ${file}.short)
# Headers written byte by byte (octal escapes of printf): version 1, 4-byte values, then ranks,
# steps, rows, d, table columns, reserved.
function(header name fields)
  execute_process(COMMAND sh -c "printf 'DCTLOOKS\\001\\0\\0\\0\\004\\0\\0\\0${fields}' > $0"
                          ${DIR}/${name})
endfunction()
header(bad_tables.lookups
       "\\002\\0\\0\\0\\001\\0\\0\\0\\001\\0\\0\\0\\012\\0\\0\\0\\003\\0\\0\\0\\0\\0\\0\\0")
expect_refusal("table columns 3 do not divide d 10" 2 ${DIR}/bad_tables.lookups)
header(huge.lookups
       "\\002\\0\\0\\0\\377\\377\\377\\177\\377\\377\\377\\177\\377\\377\\377\\177\\001\\0\\0\\0\\0\\0\\0\\0")
expect_refusal("header sizes too large" 2 ${DIR}/huge.lookups)
header(zero_rows.lookups
       "\\002\\0\\0\\0\\001\\0\\0\\0\\0\\0\\0\\0\\004\\0\\0\\0\\004\\0\\0\\0\\0\\0\\0\\0")
expect_refusal("rows 0 out of range" 2 ${DIR}/zero_rows.lookups)
execute_process(COMMAND sh -c "printf 'DCTLOOKS\\002\\0\\0\\0\\004\\0\\0\\0' > $0; head -c 24 /dev/zero >> $0"
                        ${DIR}/version2.lookups)
expect_refusal("format version 2, expected 1" 2 ${DIR}/version2.lookups)
message("blocks: dump, bench and validation checked")
