"""One credential rule for every URL a config holds: user info and credential-named query parameters are
refused at load, each with where the secret should go instead; URLs without one pass."""

import pytest

from ragbench.config.model import ConfigError, load_config
from ragbench.llm.redaction import url_credentials

CARRYING = [
    "https://user:pass@rag.example.com/ask",
    "https://apikey@rag.example.com/ask",
    "https://rag.example.com/ask?key=AIzaSyA",  # Google-style
    "https://fn.azurewebsites.net/api/ask?code=abc123",  # Azure Functions
    "https://acct.blob.core.windows.net/c/b?sv=2021&sig=abc%3D",  # Azure SAS
    "https://rag.example.com/ask?api_key=x",
    "https://rag.example.com/ask?apiKey=x",
    "https://rag.example.com/ask?api-key=x",
    "https://rag.example.com/ask?token=x",
    "https://rag.example.com/ask?access_token=x",
    "https://rag.example.com/ask?refresh_token=x",
    "https://rag.example.com/ask?id_token=x",
    "https://rag.example.com/ask?password=x",
    "https://rag.example.com/ask?passwd=x",
    "https://rag.example.com/ask?pwd=x",
    "https://rag.example.com/ask?secret=x",
    "https://rag.example.com/ask?client_secret=x",
    "https://rag.example.com/ask?auth=x",
    "https://bucket.s3.amazonaws.com/o?X-Amz-Credential=a&X-Amz-Signature=b",
    "https://storage.googleapis.com/b/o?X-Goog-Signature=abc",
    "https://rag.example.com/ask?signature=abc",
    "https://rag.example.com/ask?lang=en&KEY=x",  # case does not matter
    "https://rag.example.com/ask?session_token=x",
]
CLEAN = [
    "https://rag.example.com/ask",
    "http://127.0.0.1:8000/v1",
    "https://rag.example.com/ask?lang=en&top_k=5",
    "https://rag.example.com/ask?keywords=python",  # a name that only contains 'key'
    "https://rag.example.com/ask?max_tokens=64",
]


@pytest.mark.parametrize("url", CARRYING)
def test_every_credential_carrying_url_is_found(url):
    assert url_credentials(url)


@pytest.mark.parametrize("url", CLEAN)
def test_urls_without_credentials_pass(url):
    assert url_credentials(url) == []


@pytest.mark.parametrize("url", CARRYING)
@pytest.mark.parametrize(
    ("setting", "instead"),
    [
        ("systems=[{{name: team, http: {{url: '{url}'}}}}]", "headers_env"),
        ("grid.reader=[{{model: openai/x, api_base: '{url}'}}]", "api_key_env"),
        ("grid.judge=[{{model: openai/x, api_base: '{url}'}}]", "api_key_env"),
    ],
)
def test_a_config_url_with_a_credential_is_refused_at_load_and_says_where_it_goes(url, setting, instead):
    with pytest.raises(ConfigError, match="carries a credential") as refused:
        load_config(None, [setting.format(url=url)])
    assert instead in str(refused.value)
    assert "x" not in str(refused.value).split("carries a credential", 1)[1].split("(")[0]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://ragbench:hunter2@db:5432/ragbench",
        "postgresql+psycopg://ragbench@db:5432/ragbench?password=hunter2",
        "postgresql+psycopg://ragbench@db:5432/ragbench?sslpassword=hunter2",
        "postgresql+psycopg://ragbench@db:5432/ragbench?token=hunter2",
    ],
)
def test_an_llm_cache_url_with_a_credential_is_refused(url):
    with pytest.raises(ConfigError, match=r"password|credential") as refused:
        load_config(None, [f"llm_cache_url={url}"])
    assert "hunter2" not in str(refused.value)


def test_clean_urls_load():
    for url in CLEAN:
        load_config(None, [f"grid.reader=[{{model: openai/x, api_base: '{url}'}}]"])
    load_config(None, ["llm_cache_url=postgresql+psycopg://ragbench@db:5432/ragbench?sslmode=require"])
