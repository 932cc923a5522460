"""Transformer architecture, in Megatron-LM's vocabulary.

Field names follow Megatron-LM / Megatron-Core's ``TransformerConfig`` so a user can paste a
config they already run; the few DeepSeek-style names (MLA ranks, leading dense layers) follow
Megatron-Core's ``MLATransformerConfig`` and the Hugging Face config where Megatron has none.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

Activation = Literal["gelu", "swiglu", "squared-relu"]
Normalization = Literal["layernorm", "rmsnorm"]
PositionEmbedding = Literal["learned_absolute", "rope", "none"]


class ModelConfig(BaseModel):
    """A decoder-only transformer (dense or MoE), as Megatron-LM describes it.

    Notes
    -----
    Cross-field rules (raised as ``ValueError`` naming both fields):
    ``hidden_size`` divisible by ``num_attention_heads`` unless ``kv_channels`` is given;
    ``num_query_groups`` divides ``num_attention_heads``; ``moe_top_k <= num_experts``;
    ``first_k_dense < num_layers``; MLA needs ``kv_lora_rank``, ``qk_head_dim``,
    ``qk_pos_emb_head_dim`` and ``v_head_dim``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)

    name: str | None = None
    """Preset name, when the model came from one."""
    source: str | None = None
    """Citation for the architecture numbers (presets always carry one)."""

    num_layers: int = Field(gt=0, le=100_000)
    """Transformer layers (l in Narayanan et al. 2021)."""
    hidden_size: int = Field(gt=0, le=10_000_000)
    """Model width h."""
    num_attention_heads: int = Field(gt=0, le=100_000)
    """Query heads a."""
    vocab_size: int = Field(gt=0, le=100_000_000)
    """Vocabulary V before Megatron's padding to a multiple of 128 x tp."""
    ffn_hidden_size: int | None = Field(default=None, gt=0, le=100_000_000)
    """Dense MLP width; default 4 x hidden_size."""
    num_query_groups: int | None = Field(default=None, gt=0, le=100_000)
    """Key/value heads for grouped-query attention; default = num_attention_heads (MHA)."""
    kv_channels: int | None = Field(default=None, gt=0, le=100_000)
    """Per-head dimension d; default hidden_size / num_attention_heads."""
    activation: Activation = "gelu"
    """MLP activation: gelu (GPT), swiglu (Llama, Mixtral, DeepSeek), squared-relu (Nemotron-4)."""
    normalization: Normalization = "layernorm"
    add_bias_linear: bool = True
    """Biases on the linear layers (GPT: yes; Llama: no)."""
    position_embedding_type: PositionEmbedding = "learned_absolute"
    max_position_embeddings: int | None = Field(default=None, gt=0, le=100_000_000)
    """Rows of the learned position table; default = the workload's seq_len (as Narayanan
    2021 eq. 2 counts it)."""
    untie_embeddings_and_output_weights: bool = False
    """Separate input embedding and output projection (Llama, Nemotron-4); GPT ties them."""
    hidden_dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Dropout after attention and MLP (Megatron default 0.1; 0 for Llama-style models).
    With dropout > 0 its 1-byte mask is stored (Korthikanti et al. 2022, section 4.1)."""
    attention_dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Dropout on the attention probabilities (Megatron default 0.1)."""
    parallel_block: bool = False
    """Attention and MLP read the same normalised input and their outputs are summed
    (GPT-J / PaLM "parallel layers"; MegaScale section 3.1)."""
    sliding_window: int | None = Field(default=None, gt=0, le=100_000_000)
    """Each query attends to at most this many preceding keys (Mistral-style; Megatron-Core's
    ``window_size`` left edge)."""
    window_attn_skip_freq: int | None = Field(default=None, ge=1, le=100_000)
    """With ``sliding_window``: every N-th layer (1-based) attends over the whole sequence, the
    others over the window (Megatron-Core's ``window_attn_skip_freq``, integer form; GPT-OSS:
    2, windowed and full layers alternate). None = every layer windowed."""

    # --- mixture of experts (Megatron-Core names; aliases for the MCore CLI spelling) ---
    num_experts: int | None = Field(
        default=None, gt=0, le=1_000_000,
        validation_alias=AliasChoices("num_experts", "num_moe_experts"))
    """Routed experts per MoE layer; None = dense model."""
    moe_top_k: int = Field(
        default=2, gt=0, le=1024, validation_alias=AliasChoices("moe_top_k", "moe_router_topk"))
    """Experts each token is routed to."""
    moe_ffn_hidden_size: int | None = Field(default=None, gt=0, le=100_000_000)
    """Width of one routed expert's MLP; default ffn_hidden_size."""
    moe_shared_expert_intermediate_size: int | None = Field(default=None, gt=0, le=100_000_000)
    """Total width of the shared experts (DeepSeek-V3: 1 x 2048); None = no shared expert."""
    first_k_dense: int = Field(
        default=0, ge=0, le=100_000,
        validation_alias=AliasChoices("first_k_dense", "first_k_dense_replace"))
    """Leading layers that keep a dense MLP in an MoE model (DeepSeek-V3: 3)."""
    mtp_num_layers: int = Field(default=0, ge=0, le=64)
    """Multi-token-prediction layers (DeepSeek-V3 section 2.2; Megatron-Core
    ``mtp_num_layers``): each is one more transformer layer of the model's last kind and one
    more pass through the shared output layer and loss, on the pipeline's last virtual stage
    unless ``parallel.pipeline_layout`` places it (its 2h x h input projection, under 1 % of
    the layer, is not counted)."""

    # --- multi-latent attention (DeepSeek-V2/V3; Megatron-Core MLATransformerConfig) ---
    multi_latent_attention: bool = False
    q_lora_rank: int | None = Field(default=None, gt=0, le=10_000_000)
    """Rank of the query down-projection; None = a full-rank query projection."""
    kv_lora_rank: int | None = Field(default=None, gt=0, le=10_000_000)
    """Rank of the joint key/value latent that is cached."""
    qk_head_dim: int | None = Field(default=None, gt=0, le=100_000)
    """Per-head query/key dimension without the rotary part."""
    qk_pos_emb_head_dim: int | None = Field(default=None, gt=0, le=100_000)
    """Per-head rotary dimension (shared across heads for keys)."""
    v_head_dim: int | None = Field(default=None, gt=0, le=100_000)
    """Per-head value dimension."""

    @model_validator(mode="after")
    def _cross_field_rules(self) -> "ModelConfig":
        h, a = self.hidden_size, self.num_attention_heads
        if self.kv_channels is None and not self.multi_latent_attention and h % a:
            raise ValueError(
                f"hidden_size ({h}) must be divisible by num_attention_heads ({a}), "
                "or set kv_channels")
        if a % self.query_groups:
            raise ValueError(
                f"num_query_groups ({self.query_groups}) must divide num_attention_heads ({a})")
        if self.num_experts is None:
            if self.first_k_dense or self.moe_ffn_hidden_size or \
                    self.moe_shared_expert_intermediate_size:
                raise ValueError("first_k_dense / moe_ffn_hidden_size / "
                                 "moe_shared_expert_intermediate_size need num_experts")
        else:
            if self.moe_top_k > self.num_experts:
                raise ValueError(f"moe_top_k ({self.moe_top_k}) must be <= num_experts "
                                 f"({self.num_experts})")
            if self.first_k_dense >= self.num_layers:
                raise ValueError(f"first_k_dense ({self.first_k_dense}) must be < num_layers "
                                 f"({self.num_layers})")
        if self.window_attn_skip_freq is not None and self.sliding_window is None:
            raise ValueError("window_attn_skip_freq needs sliding_window (the window the other "
                             "layers attend over)")
        mla = ("kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")
        if self.multi_latent_attention:
            missing = [f for f in mla if getattr(self, f) is None]
            if missing:
                raise ValueError(f"multi_latent_attention needs {', '.join(missing)}")
        elif any(getattr(self, f) is not None for f in (*mla, "q_lora_rank")):
            raise ValueError("kv_lora_rank / q_lora_rank / qk_head_dim / v_head_dim "
                             "need multi_latent_attention: true")
        return self

    # ---- derived sizes (properties, never stored) ----
    @property
    def ffn(self) -> int:
        """Dense MLP width f."""
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def query_groups(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def head_dim(self) -> int:
        """Per-head dimension d of standard attention."""
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts is not None

    @property
    def moe_ffn(self) -> int:
        return self.moe_ffn_hidden_size or self.ffn

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.first_k_dense if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    @property
    def gated(self) -> bool:
        """SwiGLU has two input projections (gate and up)."""
        return self.activation == "swiglu"

    @property
    def windowed_fraction(self) -> float:
        """Share of the layers that attend over ``sliding_window`` (layer n, 1-based, is full
        when n is a multiple of ``window_attn_skip_freq``: Megatron-Core's
        ``is_layer_window_attention``)."""
        if self.sliding_window is None:
            return 0.0
        n = self.window_attn_skip_freq
        return 1.0 if n is None else (self.num_layers - self.num_layers // n) / self.num_layers

    def is_moe_layer(self, index: int) -> bool:
        """Layer ``index`` (0-based) has routed experts."""
        return self.is_moe and index >= self.first_k_dense
