"""Per-parameter-group learning rates (--param_group_lr 'lm_head|shared=1e-3,.*=1e-4') for any --optim.

Items are tried in order and the first regex that matches a parameter's name (re.search) sets its learning
rate. Weight decay keeps HF's rule (no decay on biases and layer norms), so each item gives up to two groups.
"""
import logging
import re

from transformers import Trainer

from t5kit.errors import UsageError
from t5kit.optim import optimizer_classes

logger = logging.getLogger(__name__)

# One "REGEX=LR" item and the comma after it. The regex is matched lazily up to the first "=number" that ends
# an item, so commas inside a regex (a{1,2}) stay part of it.
ITEM = re.compile(r"\s*(.+?)\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?:,|$)")


def split_items(text):
    """'lm_head|shared=1e-3,.*=1e-4' -> [('lm_head|shared', 1e-3), ('.*', 1e-4)]."""
    items, position = [], 0
    while position < len(text):
        match = ITEM.match(text, position)
        if not match:
            raise UsageError(f"--param_group_lr item {text[position:]!r} is not REGEX=LR, e.g. 'lm_head|shared=1e-3'")
        items.append((match.group(1), float(match.group(2))))
        position = match.end()
    return items


def parse_param_group_lr(entries):
    """['REGEX=LR', ...] (each may hold several comma-separated items) -> [(compiled regex, lr), ...] in order."""
    rules = []
    for pattern, lr in (item for entry in entries for item in split_items(entry)):
        try:
            rules.append((re.compile(pattern), lr))
        except re.error as err:
            raise UsageError(f"--param_group_lr regex {pattern!r} is invalid: {err}") from None
    return rules


def assign_parameters(named_parameters, rules):
    """{rule index: [(name, parameter), ...]}; refuses unmatched parameters and rules that match nothing."""
    assigned = {index: [] for index in range(len(rules))}
    for name, parameter in named_parameters:
        index = next((i for i, (regex, _) in enumerate(rules) if regex.search(name)), None)
        if index is None:
            raise UsageError(f"--param_group_lr: parameter {name!r} matches no item; add a catch-all like '.*=1e-4'")
        assigned[index].append((name, parameter))
    for index, members in assigned.items():
        if not members:
            raise UsageError(f"--param_group_lr regex {rules[index][0].pattern!r} matches no parameter (it may be "
                             "shadowed by an earlier item); parameter names look like "
                             f"{named_parameters[0][0]!r}")
    return assigned


def build_param_groups(model, items, weight_decay):
    """Optimizer parameter groups with a learning rate per --param_group_lr item, split by weight decay."""
    rules = parse_param_group_lr(items)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay_names = set(Trainer.get_decay_parameter_names(None, model))
    groups = []
    for index, members in assign_parameters(trainable, rules).items():
        regex, lr = rules[index]
        for decays in (True, False):
            params = [p for n, p in members if (n in decay_names) == decays]
            if params:
                groups.append({"params": params, "lr": lr, "weight_decay": weight_decay if decays else 0.0,
                               "name": f"{regex.pattern} ({'decay' if decays else 'no decay'})"})
    for group in groups:
        logger.info("param group %-40s lr %.3g  %8d tensors  %10d parameters", group["name"], group["lr"],
                    len(group["params"]), sum(p.numel() for p in group["params"]))
    return groups


def create_optimizer(model, args):
    """The --optim optimizer over per-regex groups, or None to let Trainer build its default one."""
    if not args.param_group_lr:
        return None
    optimizer_cls, optimizer_kwargs = optimizer_classes.optimizer_cls_and_kwargs(args, model)
    optimizer_kwargs.pop("lr", None)  # each group carries its own
    groups = build_param_groups(model, args.param_group_lr, args.weight_decay)
    # torch optimizers ignore unknown group keys, but some (Adafactor) validate them: drop our label.
    for group in groups:
        group.pop("name")
    return optimizer_cls(groups, **optimizer_kwargs)
