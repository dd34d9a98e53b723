"""Exports of plans and measured clusters to formats other tools run: MSCCL algorithm XML
(``msccl``, ``msccl_xml``) and NCCL topology XML with the job's NCCL environment
(``nccl_topo``)."""
