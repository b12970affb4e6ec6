"""The capacity model on AWS's documented limits: what a midnight needs (``duetime plan``), the stack's warm
throughput (the CDK app sizes tables and pollers from it) and what the idle stack costs."""
