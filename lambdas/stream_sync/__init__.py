"""DynamoDB stream -> OpenSearch sync: the Lambda handler, its batch logic and the DLQ redrive tool."""
