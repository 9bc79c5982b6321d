"""`graph_function`: `tf.function` for the package's graph code, without AutoGraph.

The searches, generators and export signatures spell their control flow with
`tf.while_loop`, `tf.cond` and `tf.where`, so AutoGraph has nothing to convert; it
would still re-parse every Python function a trace reaches, which costs seconds at
the first trace in each process (every `keras-transformer export`).
"""

import functools

import tensorflow as tf

graph_function = functools.partial(tf.function, autograph=False)
