"""The pre-training objectives, one owner each: the shapes an objective cuts the corpus into, the collator that
corrupts the windows, and what the run record and the model card say of it.

    objective = objectives.build(spec)                        # spec: specs.ObjectiveSpec, from the flags
    objective.tokens_length, objective.row_shape              # windows of tokens_length ids; rows of the batches
    collator = objective.collator(tokenizer, seed=42)         # span corruption's or UL2's, at the window's shapes
    objective.derived()                                       # config.yaml's derived: section
    text, table = objective.card_section()                    # the model card's objective section

span_corruption is T5's (data_collator.py); ul2 and prefix_lm are mixtures of denoisers (ul2.py), prefix-LM being a
mixture of one S-denoiser. Packed (--packing), a mixture cuts shorter windows, several to a row of
`spec.input_length` inputs and a matched number of targets (ul2.packed_lengths). A new objective is a class here
with these members, its name in constants.OBJECTIVES (the flag's choices) and its tests: the entry scripts do not
change.
"""
from data_collator import DataCollatorForT5SpanCorruption, compute_input_and_target_lengths
from t5kit.data import ul2
from t5kit.specs import ObjectiveSpec

TITLES = {"span_corruption": "Span corruption (T5)", "ul2": "UL2 (mixture of denoisers)",
          "prefix_lm": "Prefix-LM (T5)"}


class SpanCorruption:
    """T5's span corruption: every window gives exactly input_length inputs and target_length targets."""

    packable = False  # no padding to fill: config/pretrain_arguments.check_packing refuses --packing with it
    continues_text = False  # its model fills sentinel spans (the card's usage example)

    def __init__(self, spec: ObjectiveSpec):
        self.spec, self.title = spec, TITLES[spec.name]
        self.tokens_length, self.target_length = compute_input_and_target_lengths(
            spec.input_length, spec.noise_density, spec.mean_noise_span_length)
        self.row_shape = (spec.input_length, self.target_length)
        self.mode_tokens = []

    def collator(self, tokenizer, seed):
        spec = self.spec
        return DataCollatorForT5SpanCorruption(
            tokenizer, noise_density=spec.noise_density, mean_noise_span_length=spec.mean_noise_span_length,
            input_length=spec.input_length, target_length=self.target_length, seed=seed,
            tokens_length=self.tokens_length)

    def derived(self) -> dict:
        return {"tokens_length": self.tokens_length, "input_length": self.spec.input_length,
                "target_length": self.target_length}

    def card_section(self):
        """(paragraph, None): the model card's objective section."""
        return (f"Span corruption (Raffel et al. 2020, sec. 3.1.4): windows of {self.tokens_length} tokens, "
                f"{self.spec.noise_density:.0%} of them in noise spans of mean length "
                f"{self.spec.mean_noise_span_length}, each span replaced by one sentinel in the input and the kept "
                f"text by sentinels in the target ({shapes(self.row_shape)})."), None


class DenoiserMixture:
    """UL2's mixture of denoisers, or prefix-LM (one S-denoiser): one window length for the whole mixture, rows
    padded to the longest inputs and targets; packed, shorter windows of at most window_shape, several to a row."""

    packable = True

    def __init__(self, spec: ObjectiveSpec):
        self.spec, self.title, self.denoisers = spec, TITLES[spec.name], list(spec.denoisers)
        if spec.packed:
            window_inputs, self.tokens_length, window_targets, self.target_length = ul2.packed_lengths(
                spec.input_length, self.denoisers, spec.packing_window_input_length)
            self.window_shape = (window_inputs, window_targets)
        else:
            self.tokens_length, self.target_length = ul2.mixture_lengths(spec.input_length, self.denoisers)
            self.window_shape = (spec.input_length, self.target_length)
        self.row_shape = (spec.input_length, self.target_length)
        self.mode_tokens = ul2.mode_tokens(self.denoisers)
        self.continues_text = spec.name == "prefix_lm"  # prefix-LM alone never shows a sentinel: it continues text

    def collator(self, tokenizer, seed):
        return ul2.DataCollatorForUL2(tokenizer, self.denoisers, input_length=self.window_shape[0], seed=seed,
                                      tokens_length=self.tokens_length, target_length=self.window_shape[1])

    def derived(self) -> dict:
        lengths = {"tokens_length": self.tokens_length, "input_length": self.spec.input_length,
                   "target_length": self.target_length}
        return {**lengths, "packing_window_input_length": self.window_shape[0]} if self.spec.packed else lengths

    def card_section(self):
        """(paragraph, (header, rows)): the model card's objective section, a row per denoiser."""
        rows = [["" if value is None else value for value in (d["paradigm"], d.get("noise_density"),
                 d.get("mean_noise_span_length"), f"{d['proportion']:.4g}", d.get("mode_token"))]
                for d in self.denoisers]
        anchor = ("UL2 (Tay et al. 2022): a mixture of denoisers, one per window" if self.spec.name == "ul2"
                  else "Prefix-LM (T5's prefix_lm): each window split at a uniform point")
        fitted = (f"packed several to a row with segment ids (`--packing`; rows of {shapes(self.row_shape)})"
                  if self.spec.packed else f"padded to fixed shapes ({shapes(self.row_shape)})")
        return (f"{anchor}, windows of {self.tokens_length} tokens {fitted}.",
                (("paradigm", "noise density", "mean span", "proportion", "mode token"), rows))


OBJECTIVES = {"span_corruption": SpanCorruption, "ul2": DenoiserMixture, "prefix_lm": DenoiserMixture}


def build(spec: ObjectiveSpec):
    """The objective the spec names, its shapes computed (and refused with one error line where they cannot be)."""
    return OBJECTIVES[spec.name](spec)


def shapes(row_shape) -> str:
    return f"inputs of {row_shape[0]} tokens, targets of {row_shape[1]} tokens"
