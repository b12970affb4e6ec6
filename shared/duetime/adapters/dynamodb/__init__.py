"""DynamoDB adapter: tables, item codec, named conditional writes and the store."""
