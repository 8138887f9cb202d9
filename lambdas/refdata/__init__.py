"""refdata: the reference-data platform's conventions (schemas, keys, items, numbers, geometry), its writer and its
readers' queries, as application teams install them (distribution `refdata-client`) and the Lambda functions ship
them (lambdas/ is the root of every function's asset). The conventions import without boto3; the writer and the
reader's transport need it (the `aws` extra)."""

__version__ = "1.0.0"
