"""The data path shared by the client and the executor: encoding objects and naming them by
content (``_objects``), writing them through kept mappings (``_write_maps``), and moving them
to and from the runtime's store (``_transfer``, over the raw TCP data port in ``_bulk``).
"""
