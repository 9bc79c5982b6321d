"""Token ids fixed across tokenizers, models, decoding and export."""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2  # start of sequence: the first decoder input token.
EOS_ID = 3  # end of sequence: decoding stops when it is produced.
