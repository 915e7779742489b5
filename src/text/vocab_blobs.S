// The tokenizer vocabularies, embedded at build time from the npm `tiktoken` package so that the
// grag binary is self-contained (no data files to find at run time).
        .section .rodata
        .balign 16
        .global grag_cl100k_json_begin
grag_cl100k_json_begin:
        .incbin GRAG_CL100K_PATH
        .global grag_cl100k_json_end
grag_cl100k_json_end:
        .byte 0
        .balign 16
        .global grag_o200k_json_begin
grag_o200k_json_begin:
        .incbin GRAG_O200K_PATH
        .global grag_o200k_json_end
grag_o200k_json_end:
        .byte 0
        .section .note.GNU-stack,"",@progbits
