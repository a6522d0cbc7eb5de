"""t5rank: monoT5 sequence-to-sequence document ranking in JAX."""

from setuptools import setup

# The set in shared/DESIGN.md, verified to install and import together on Python 3.11.
INSTALL_REQUIRES = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",
    "optax==0.2.8",
    "orbax-checkpoint==0.12.8",
    "seqio==0.0.20",
    "tensorflow==2.21.0",
    "tensorflow-text==2.21.1",
    "tensorflow-datasets==4.9.10",
    "sentencepiece==0.2.3",
    "gin-config==0.5.0",
    "clu==0.0.12",
    "tensorboard==2.21.0",  # clu's metric writers need it and do not declare it
    "safetensors==0.8.0",  # Hugging Face checkpoints without torch
    # Hub ids (`--checkpoint ORG/NAME`): the local cache, or a download. A range, not a pin: the
    # [reference] extra's transformers 4.57.1 needs a release below 1.0; alone, pip takes 2.4.0
    "huggingface-hub>=0.34,<3",
    "tqdm==4.70.1",  # progress bars
    "insuranceqa-data==1.2",  # the offline InsuranceQA v2 corpus (1.3+ download at run time)
    "sentencex==1.0.32",  # offline sentence splitter (English, Chinese, ~300 languages) for MaxP windows
    "bm25s==0.3.16",  # BM25 index (sparse matrix, saved to a directory) for `t5rank retrieve`
    "PyStemmer==3.1.0",  # Porter stemmer for English BM25 tokenization
    "jieba==0.42.1",  # Chinese word segmentation for BM25 (`--language zh-jieba`)
    "scipy==1.17.1",  # sparse matrices for BM25/RM3 scoring; the paired t-test of `t5rank evaluate`
    "ir-measures==0.4.3",  # ranking metrics for `t5rank evaluate`
    "pytrec-eval-terrier==0.5.11",  # trec_eval backend of ir-measures (trec_eval semantics)
    "importlib_resources==7.1.0",  # needed by tensorflow-datasets to build datasets (not declared by it)
    "gensim==4.4.0",  # word2vec: TK's word embeddings learned on the collection (`t5rank embeddings`)
    "faiss-cpu==1.15.1",  # ANN search (exact IndexFlatIP, HNSW) over dense indexes (`t5rank index`)
    "scikit-learn==1.9.1",  # TF-IDF, the first-stage baseline of the dense retrieval comparison
    "matplotlib==3.10.9",  # the comparison chart of `t5rank demo` (Agg backend, no display)
    "starlette==1.10.0",  # `t5rank serve`'s HTTP application (ASGI)
    "uvicorn==0.54.0",  # the ASGI server that runs it (its pure-Python h11 protocol)
    "prometheus-client==0.26.0",  # `t5rank serve`'s GET /metrics, in Prometheus' text format
]

setup(
    name="t5rank",
    version="0.1.0",
    description="monoT5 document ranking with T5 in JAX: fine-tune, batch-score, evaluate.",
    python_requires=">=3.11",
    packages=["t5rank", "t5rank.checkpoints", "t5rank.commands", "t5rank.data", "t5rank.evaluation",
              "t5rank.models", "t5rank.models.t5_weights", "t5rank.pipelines", "t5rank.ranking",
              "t5rank.retrieval", "t5rank.serving", "t5rank.training", "t5rank.tasks",
              "t5rank.gin"],
    # the card's top level: tasks/ and gin/ sit beside t5rank/ in the checkout (`import tasks`,
    # `--gin_file=gin/experiments/...`) and are carried in the package as t5rank.tasks, t5rank/gin
    package_dir={"t5rank.tasks": "tasks", "t5rank.gin": "gin"},
    # the vocabularies, the gin files (`--gin_file=gin/experiments/...` from any directory) and the
    # shipped models (t5rank/shipped: `shipped:NAME`)
    package_data={"t5rank": ["data/*.model", "shipped/**/*"], "t5rank.gin": ["*/*.gin"]},
    install_requires=INSTALL_REQUIRES,
    extras_require={
        # the tests run the PyTerrier transformers too
        "test": ["pytest==9.2.0", "pytest-xdist==3.8.0", "pyterrier==1.1.2"],
        # t5rank.pyterrier: any checkpoint as a PyTerrier transformer (no Java needed)
        "pyterrier": ["pyterrier==1.1.2"],
        # Only for scripts/make_hf_goldens.py and the speed comparison against PyTorch.
        "reference": ["torch==2.13.0", "transformers==4.57.1"],
        # On a Cloud TPU VM (tpu_scripts/install.sh); libtpu comes with it, add
        # -f https://storage.googleapis.com/jax-releases/libtpu_releases.html to pip.
        "tpu": ["jax[tpu]==0.10.2"],
        # On an NVIDIA GPU host (CUDA 12 wheels: the plugin brings its CUDA libraries):
        # pip install -e '.[cuda]'
        "cuda": ["jax[cuda12]==0.10.2"],
    },
    entry_points={"console_scripts": ["t5rank=t5rank.cli:main"]},
)
