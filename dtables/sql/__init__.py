"""The SQL surface, in layers: the statement executor (``executor``, with ``catalog_ddl``) on top of everything; view
expansion (``views``) above the catalog; and below the catalog the dialect (``dialect``: Spark SQL plus dtables'
statements, parsed by the ``*_syntax`` modules into the classes of ``expressions``) and plain helpers on trees and
names (``references``, ``names``, ``output_names``, ``chains``, ``spark_errors``)."""
