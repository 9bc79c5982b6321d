"""Floor 3: figures of a run: attention heatmaps and training curves (matplotlib, Agg).

`fonts` registers a font that draws Chinese and checks for missing glyphs;
`attention` draws a translation's attention as a layers × heads grid; `history`
draws history.json's loss, accuracy and learning rate. The commands
`plot-attention` and `plot-history` live in `attention_command` and
`history_command`.
"""
