"""The paper's learning-rate schedule: linear warmup, then inverse square root.

    lr(step) = scale · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)

with `step` counted from 1 (the optimizer's iteration count + 1). The rate rises
linearly for `warmup_steps` steps, peaks at `scale · (d_model · warmup_steps)^-0.5`
and then decays as `step^-0.5`.

The paper warms up for 4,000 steps of 25,000-token batches on 4.5M sentence pairs.
The bundled corpus (25k training pairs, about 100 steps of 4,096 tokens per epoch)
is 200 times smaller, and a 25-minute run of the small preset on the 2-core CPU
makes about 1,000 steps (1.5-2 s each, measured): 4,000 warmup steps would spend
the whole run warming up. The default warms up over 250 steps (about 2.5 epochs,
a quarter of such a run) with scale 0.3, a peak of 1.2e-3 for d_model = 256. These
are sized from the step counts, not yet tuned by quality runs.
"""

import keras
from keras import ops

from keras_transformer.training.config import DEFAULT_SCALE
from keras_transformer.training.config import DEFAULT_WARMUP_STEPS


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Warmup-then-inverse-square-root learning rate (Vaswani et al., 2017, §5.3).

    Args:
        d_model: model width M; the rate scales as M^-0.5.
        warmup_steps: steps of linear warmup; the rate peaks at this step.
        scale: factor on the whole schedule (1.0 is the paper's).

    Call arguments:
        step: the optimizer's iteration count (0 for the first update).

    Returns:
        A float32 scalar learning rate.

    Example:
        >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
        >>> round(float(schedule(3999)), 7)  # the peak: (512 * 4000) ** -0.5
        0.0006988
    """

    def __init__(self, d_model, warmup_steps=DEFAULT_WARMUP_STEPS, scale=DEFAULT_SCALE):
        if d_model <= 0 or warmup_steps <= 0 or scale <= 0:
            raise ValueError(
                "`d_model`, `warmup_steps` and `scale` must be positive; received "
                f"d_model={d_model}, warmup_steps={warmup_steps}, scale={scale}."
            )
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        decay = ops.rsqrt(step)
        warmup = step * (self.warmup_steps**-1.5)
        return self.scale * (self.d_model**-0.5) * ops.minimum(decay, warmup)

    def peak(self):
        """The highest rate, reached at step `warmup_steps`."""
        return self.scale * (self.d_model * self.warmup_steps) ** -0.5

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
