"""The paper's learning-rate schedule: linear warmup, then inverse square root.

    lr(step) = scale · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)

or, with `decay="linear"`, the same warmup to the same peak and then a straight line
down to 0 at `total_steps` (a fixed step budget's schedule, as fairseq's
`polynomial_decay` or BERT's):

    lr(step) = peak · min(step / warmup, (total - step + 1) / (total - warmup + 1)), ≥ 0

with `step` counted from 1 (the optimizer's iteration count + 1). The rate rises
linearly for `warmup_steps` steps, peaks at `scale · (d_model · warmup_steps)^-0.5`
and then decays as `step^-0.5`.

The paper warms up for 4,000 steps of 25,000-token batches on 4.5M sentence pairs.
The bundled corpus (25k training pairs, about 100 steps of 4,096 tokens per epoch)
is 200 times smaller, and a 25-minute run of the small preset on the 2-core CPU
makes about 1,100 steps on an AVX2-only VM (1,116, measured) and more on faster
ones: 4,000 warmup steps would spend the whole run warming up. The default warms
up over 250 steps (about 2.5 epochs, a quarter of such a run) with scale 0.7, a
peak of 2.8e-3 for d_model = 256. The warmup is sized from the step counts. The
experiment record (docs/experiments.md) measures the scale (0.7 beats 0.5 over two
seeds at the small preset's dropout 0.3; 0.85 and 1.0 stall after the warmup), the
linear decay (a lower validation loss, not a higher BLEU, so rsqrt is the default)
and the warmup (150 and 400 steps score lower than 250 in 25 minutes).
"""

import keras
from keras import ops

from keras_transformer.training.config import DEFAULT_SCALE
from keras_transformer.training.config import DEFAULT_WARMUP_STEPS
from keras_transformer.training.config import LR_DECAYS


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Warmup-then-inverse-square-root learning rate (Vaswani et al., 2017, §5.3),
    or warmup then linear decay to 0.

    Args:
        d_model: model width M; the rate scales as M^-0.5.
        warmup_steps: steps of linear warmup; the rate peaks at this step.
        scale: factor on the whole schedule (1.0 is the paper's).
        decay: after the peak, "rsqrt" (the paper's step^-0.5) or "linear" (to 0 at
            `total_steps`).
        total_steps: "linear": the step at which the rate reaches 0 (more than
            `warmup_steps`); unused by "rsqrt".

    Call arguments:
        step: the optimizer's iteration count (0 for the first update).

    Returns:
        A float32 scalar learning rate.

    Example:
        >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
        >>> round(float(schedule(3999)), 7)  # the peak: (512 * 4000) ** -0.5
        0.0006988
    """

    def __init__(self, d_model, warmup_steps=DEFAULT_WARMUP_STEPS, scale=DEFAULT_SCALE,
                 decay="rsqrt", total_steps=None):
        if d_model <= 0 or warmup_steps <= 0 or scale <= 0:
            raise ValueError(
                "`d_model`, `warmup_steps` and `scale` must be positive; received "
                f"d_model={d_model}, warmup_steps={warmup_steps}, scale={scale}."
            )
        if decay not in LR_DECAYS:
            raise ValueError(f"`decay` must be one of {list(LR_DECAYS)}; received {decay!r}.")
        if decay == "linear" and not (total_steps and total_steps > warmup_steps):
            raise ValueError(
                "A linear decay needs `total_steps` above `warmup_steps`; received "
                f"total_steps={total_steps!r}, warmup_steps={warmup_steps}."
            )
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)
        self.decay = decay
        self.total_steps = int(total_steps) if decay == "linear" else None

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        if self.decay == "linear":
            warmup = step / self.warmup_steps
            # 1 at the peak, 1 / (total - warmup + 1) at the last update, then 0.
            span = self.total_steps - self.warmup_steps + 1.0
            remaining = (self.total_steps - step + 1.0) / span
            return self.peak() * ops.maximum(0.0, ops.minimum(warmup, remaining))
        decay = ops.rsqrt(step)
        warmup = step * (self.warmup_steps**-1.5)
        return self.scale * (self.d_model**-0.5) * ops.minimum(decay, warmup)

    def peak(self):
        """The highest rate, reached at step `warmup_steps`."""
        return self.scale * (self.d_model * self.warmup_steps) ** -0.5

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale,
                "decay": self.decay, "total_steps": self.total_steps}
