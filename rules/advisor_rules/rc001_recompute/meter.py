"""Sizes and forward kernel time of the layer ops a fix recomputes: measured on a rank, else priced from the config."""

from __future__ import annotations

from typing import Any

from advisor_core.config.model_structure import LayerOp, LayerStructure
from advisor_core.config.training import TrainingConfig, dtype_bytes
from advisor_rules._common import ASSUMED_CUBE_TFLOPS, ASSUMED_HBM_GBPS, cell_path_in_layer, layer_of_scope
from advisor_rules.rc001_recompute.issues import is_backward, node_bytes

# Views: no kernel of their own (graph_build eliminates them as no-op nodes), so recomputing is free.
_VIEWS = {"Reshape", "ExpandDims", "Squeeze", "Flatten"}


class Meter:
    """Output sizes and forward kernel time per step of layer ops, measured on one rank where possible.

    IR nodes are matched to layer ops by (layer, cell path, attribute) and call order; kernels by
    their full name. Ops the rank does not hold (other pipeline stages) take the mean over the
    layers it does; with no evidence, sizes follow the config and times the assumed HBM/cube rates.
    """

    def __init__(self, ir: Any, times: dict[str, float], steps: int, structure: LayerStructure, cfg: TrainingConfig,
                 micro: int) -> None:
        self.st, self.times, self.steps, self.micro = structure, times, steps, micro
        self.sizes, self.nbytes = symbol_sizes(cfg), dtype_bytes(cfg.compute_dtype)
        self.call = {o.id: sum(1 for p in structure.ops[:i] if p.path == o.path) for i, o in enumerate(structure.ops)}
        self.nodes: dict[tuple, list[Any]] = {}
        for n in (ir.iter_nodes() if ir is not None else ()):
            lay = layer_of_scope(n.scope)
            if lay is not None and not n.is_duplicated and not is_backward(n):
                self.nodes.setdefault((lay, cell_path_in_layer(n.scope) + (n.instance_name or n.op.lower(),)), []).append(n)
        # Without an IR: kernels by (layer, cell path, op type), in op-number order.
        self.kernels: dict[tuple, list[float]] = {}
        if ir is None:
            for scope, us in sorted(times.items(), key=lambda kv: kv[0]):
                segs = scope.split("/")
                if any(s.startswith(("Grad_", "Gradients", "recompute_")) for s in segs) or layer_of_scope(scope) is None:
                    continue
                self.kernels.setdefault((layer_of_scope(scope), cell_path_in_layer(scope), segs[-1].split("-op")[0]), []).append(us)
        self.layers = sorted({k[0] for k in self.nodes} | {k[0] for k in self.kernels})
        self.measured = bool(times) and bool(self.nodes or self.kernels)

    def _node(self, op: LayerOp, layer: int) -> Any:
        ns = self.nodes.get((layer, op.path), [])
        calls = sum(1 for o in self.st.ops if o.path == op.path)
        if len(ns) >= calls:
            k = self.call[op.id]
            return ns[k] if k < len(ns) else None
        # Fewer nodes than calls: CSE merged a call with another cell's identical one (w1's input
        # Reshape is w3's), so call order no longer lines up; the output rank tells the calls apart.
        fit = [n for n in ns if n.out_types and getattr(n.out_types[0], "shape", None) is not None
               and len(n.out_types[0].shape) == len(op.shape)]
        return fit[0] if len(fit) == 1 else None

    def tensor_bytes(self, tensor: str, layer: int) -> float:
        prod = self.st.by_out.get(tensor)
        if prod is not None:
            for lay in (layer, *self.layers):
                n = self._node(prod, lay)
                if n is not None and node_bytes(n):
                    return node_bytes(n)
        return tensor_size(self.st, tensor, self.sizes, self.nbytes)

    def _measured_us(self, op: LayerOp, layer: int) -> float | None:
        if not self.times:
            return None
        n = self._node(op, layer)
        if n is not None:  # no kernel under the node's name: a view, eliminated in graph_build
            return self.times.get(n.kernel_full_name or "", 0.0) / self.steps
        ks = self.kernels.get((layer, op.path[:-1], op.prim))
        if ks is not None:
            k = sum(1 for o in self.st.ops[: self.st.ops.index(op)] if o.path[:-1] == op.path[:-1] and o.prim == op.prim)
            return ks[k] / self.steps if k < len(ks) else 0.0
        return None

    def fwd_us(self, op: LayerOp, layer: int) -> float:
        """Forward kernel µs per step (all micro batches) of ``op`` in ``layer``."""
        v = self._measured_us(op, layer)
        if v is not None:
            return v
        others = [x for x in (self._measured_us(op, lay) for lay in self.layers) if x is not None]
        if others:
            return sum(others) / len(others)
        if op.prim in _VIEWS:
            return 0.0
        if op.flops:
            n = 1.0
            for part in op.flops.split("*"):
                n *= float(part) if part.isdigit() else self.sizes.get(part, 1)
            return n / max(self.sizes["mp"], 1) / (ASSUMED_CUBE_TFLOPS * 1e6) * self.micro
        moved = sum(tensor_size(self.st, t, self.sizes, self.nbytes) for t in op.inputs if not t.startswith("param:"))
        moved += tensor_size(self.st, op.out, self.sizes, self.nbytes)
        return moved / (ASSUMED_HBM_GBPS * 1e3) * self.micro


def symbol_sizes(cfg: Any) -> dict[str, int]:
    """Values of the layer structure's shape symbols (b, s, h, f, q, k, mp) from the config."""
    h = cfg.hidden_size or 0
    f, _ = cfg.ffn_hidden_size()
    heads, kv, hd = cfg.num_heads or 1, cfg.num_kv_heads or 1, cfg.head_dim or 1
    return {"b": cfg.micro_batch_size, "s": cfg.seq_length or 1, "h": h, "f": f or 0, "q": heads * hd, "k": kv * hd,
            "mp": cfg.model_parallel}


def tensor_size(structure: Any, tensor: str, sizes: dict[str, int], nbytes: int) -> float:
    """Bytes of a layer tensor per device, from the structure's symbolic shape."""
    prod = structure.by_out.get(tensor)
    if prod is None:
        if tensor == "x":
            return float(sizes["b"] * sizes["s"] * sizes["h"] * nbytes)
        return 0.0
    n = 1
    for dim in prod.shape:
        for part in dim.split("*"):
            n *= sizes.get(part, 1)
    per = 4 if prod.dtype == "fp32" else nbytes
    if prod.split:  # tensor parallelism divides this dimension across model_parallel ranks
        n //= max(sizes.get("mp", 1), 1)
    return float(n * per)
