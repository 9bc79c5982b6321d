"""Argument checks that raise errors naming the argument, its value and what is accepted."""


def check_positive_int(name, value):
    """Raises `ValueError` unless `value` is an int > 0 (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer; received {name}={value!r}.")
    return value


def check_optional_positive_int(name, value):
    """Like `check_positive_int`, but `None` is accepted too."""
    if value is None:
        return None
    return check_positive_int(name, value)


def check_rate(name, value):
    """Raises `ValueError` unless `value` is a float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a number in [0, 1); received {name}={value!r}.")
    return float(value)


def check_choice(name, value, choices):
    """Raises `ValueError` unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {sorted(choices)}; received {name}={value!r}."
        )
    return value


def check_divisible(name, value, divisor_name, divisor):
    """Raises `ValueError` unless `value` is divisible by `divisor`."""
    if value % divisor:
        raise ValueError(
            f"`{name}` must be divisible by `{divisor_name}`; received {name}={value} "
            f"and {divisor_name}={divisor}. Choose {name} as a multiple of {divisor_name}."
        )
    return value


def check_rank(name, shape, rank):
    """Raises `ValueError` unless `shape` has `rank` dimensions."""
    if shape is None or len(shape) != rank:
        raise ValueError(
            f"`{name}` must have rank {rank}; received a tensor of shape {shape}."
        )


def check_floating(name, dtype):
    """Raises `ValueError` unless `dtype` names a floating-point type."""
    if "float" not in str(dtype):
        raise ValueError(
            f"`{name}` must be a floating-point tensor (float16, bfloat16, float32 or "
            f"float64); received dtype {dtype}."
        )


def check_integer(name, dtype):
    """Raises `ValueError` unless `dtype` names an integer type."""
    if "int" not in str(dtype):
        raise ValueError(
            f"`{name}` must be an integer tensor of token ids (int32 or int64); "
            f"received dtype {dtype}."
        )
