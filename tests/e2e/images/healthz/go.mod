module staticpodd.test/healthz

go 1.21
