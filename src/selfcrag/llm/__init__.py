"""Model-backed components: the same Protocols as the offline ones, on any LangChain chat model.

`models` builds or holds the chat models, `structured` gets validated JSON out of them whatever the server
supports, `faults` decides what a failing call does; one module per component.
"""
