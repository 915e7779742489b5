// The tokenizer vocabularies, embedded at build time so that the grag binary is self-contained
// (no data files to find at run time): the images grag_pack_vocab makes from the npm `tiktoken`
// package's JSON (src/text/vocab_image.h), read in place at run time.
        .section .rodata
        .balign 64
        .global grag_cl100k_image_begin
grag_cl100k_image_begin:
        .incbin GRAG_CL100K_PATH
        .global grag_cl100k_image_end
grag_cl100k_image_end:
        .byte 0
        .balign 64
        .global grag_o200k_image_begin
grag_o200k_image_begin:
        .incbin GRAG_O200K_PATH
        .global grag_o200k_image_end
grag_o200k_image_end:
        .byte 0
        .section .note.GNU-stack,"",@progbits
