"""HTTP resources of greenfront: one folder per endpoint, split as vLLM's Rust frontend splits them.

Each endpoint folder holds ``types`` (field tables and constants), ``validate`` (pure checks that
raise ``errors.ApiError``), ``convert`` (request JSON -> ``PreparedRequest`` of engine requests)
and ``render`` (engine outputs -> the JSON/SSE bytes vLLM 0.32's Python frontend would send).
``common/`` holds what completions and chat share. None of these modules import falcon; the
``resource.py`` files are the thin Falcon layer on top.

Runs on: request pool threads (conversion) and the HTTP hub (output processing and rendering);
each module says which.
"""
